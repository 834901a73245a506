/*
 * bench_plots.c -- the two plots of `remat bench` and `remat report`, drawn
 * with svg.c from the bench result (see bench.h).
 *
 * Pareto plot: activation peak (x, MiB) against step time (y, ms).  Each
 * benched policy is a labelled point at its measured peak and median time;
 * a hollow marker shows the planner's predicted time for the same policy;
 * the planner's predicted front (remat_plan_pareto) is a line.
 *
 * Memory timeline: live activation bytes over one step of one policy, from
 * the schedule (the dry run is exact: its peak is the measured one).  Each
 * instruction i spans [i, i+1) on x; its left half shows the bytes at the
 * worst moment inside it (a backward allocates its gradient buffers before
 * it frees the ones it consumed) and its right half the bytes live after
 * it.  The bytes are stacked by tensor name, all layers of a name summed,
 * like PyTorch's memory_viz stacks by allocation.  Forward, backward and
 * recompute phases shade the background.
 *
 * Machine-readable hooks for tests: points carry class="point" and
 * data-policy, the front class="front"; the timeline's outline carries
 * class="total" and data-bytes (the plotted totals, in bytes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "svg.h"

#define MIB 1048576.0

/* ---- label placement ---------------------------------------------------- */

typedef struct box { double x0, y0, x1, y1; } box;

static double overlap(box a, box b)
{
    double w = fmin(a.x1, b.x1) - fmax(a.x0, b.x0), h = fmin(a.y1, b.y1) - fmax(a.y0, b.y0);
    return w > 0 && h > 0 ? w * h : 0;
}

/* Picks the candidate position around (px, py) whose label box overlaps
 * the boxes already placed (labels and points) least, inside the area. */
static box place_label(double px, double py, const char *text, double size, const box *taken, int nt,
                       box area, const char **anchor, double *tx, double *ty)
{
    double w = svg_text_width(text, size), h = size * 1.2;
    static const double cand[][2] = { { 1, -1 }, { 1, 1 }, { -1, -1 }, { -1, 1 }, { 1, 0 }, { -1, 0 }, { 0, -1.6 }, { 0, 1.6 },
                                      { 1, -2.2 }, { -1, -2.2 }, { 1, 2.2 }, { -1, 2.2 }, { 0, -3 }, { 0, 3 },
                                      { 1, -3.4 }, { -1, -3.4 }, { 1, 3.4 }, { -1, 3.4 } };
    double best = INFINITY;
    box bb = { 0, 0, 0, 0 };
    for (size_t k = 0; k < sizeof cand / sizeof cand[0]; k++) {
        double dx = cand[k][0], dy = cand[k][1];
        double bx = dx > 0 ? px + 7 : dx < 0 ? px - 7 - w : px - w / 2;
        double by = py + dy * 8 - h / 2;
        box b = { bx, by, bx + w, by + h };
        double cost = 0;
        for (int i = 0; i < nt; i++) cost += overlap(b, taken[i]);
        if (b.x0 < area.x0 || b.x1 > area.x1 || b.y0 < area.y0 || b.y1 > area.y1) cost += 1e6;
        cost += k * 0.01;   /* prefer earlier candidates on ties */
        if (cost < best) { best = cost; bb = b; }
    }
    *anchor = "start";
    *tx = bb.x0;
    *ty = bb.y1 - 2;
    return bb;
}

/* ---- Pareto plot ----------------------------------------------------------- */

/* the fronts' colours, by precision slot */
static const char *const front_color[BENCH_MAXDT] = { "#1f77b4", "#9467bd" };

static uint64_t fixed_bytes(const bench_row *w)
{
    return w->st.params_bytes + w->st.grads_bytes + w->st.optim_bytes + w->st.workspace_bytes;
}

/* The budget on the activation axis: the whole budget with
 * --budget-activations, else what is left after parameters, gradients, AdamW
 * state and workspace. */
static double act_budget(const bench_opts *o, const bench_result *r)
{
    if (!o->budget) return -1;
    if (o->act_only) return (double)o->budget;
    uint64_t fx = fixed_bytes(&r->rows[0]);
    return o->budget > fx ? (double)(o->budget - fx) : 0;
}

static void config_line(const bench_opts *o, char *buf, size_t n)
{
    const remat_config *c = &o->cfg;
    snprintf(buf, n, "%d layers, dim %d, %d heads, vocab %d, batch %d x seq %d", c->n_layer, c->n_embd, c->n_head,
             c->vocab, c->batch, c->seq);
}

int bench_svg_pareto(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl)
{
    const int W = 960, H = 620;
    const double L = 90, R = W - 250, T = 78, B = H - 72;
    char buf[256], cfgs[200];
    double xmax = 0, ymax = 0;
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        xmax = fmax(xmax, w->st.act_peak_bytes / MIB);
        ymax = fmax(ymax, w->ms_median);
        if (w->step_ms_pred >= 0) ymax = fmax(ymax, w->step_ms_pred);
    }
    for (int k = 0; k < r->nslot; k++)
        for (size_t i = 0; i < r->slot[k].n_front; i++) {
            xmax = fmax(xmax, r->slot[k].front[i].peak_bytes / MIB);
            ymax = fmax(ymax, r->slot[k].front[i].step_ms_pred);
        }
    double ab = act_budget(o, r);
    if (ab >= 0 && ab / MIB <= 1.5 * xmax) xmax = fmax(xmax, ab / MIB);
    svg_axis ax, ay;
    svg_axis_nice(&ax, 0, xmax * 1.06, 8, L, R);
    svg_axis_nice(&ay, 0, ymax * 1.08, 8, B, T);

    config_line(o, cfgs, sizeof cfgs);
    snprintf(buf, sizeof buf, "remat bench: activation peak vs step time (%s)", cfgs);
    svg_begin(f, W, H, xml_decl, buf);
    svg_text(f, L, 30, "start", 18, 0, "class=\"title\" font-weight=\"bold\"", "Activation memory vs step time, per recomputation policy");
    snprintf(buf, sizeof buf, "%s | measured: median of %ld interleaved rounds, %d thread(s)", cfgs, o->steps,
             remat_get_threads());
    svg_text(f, L, 52, "start", 12.5, 0, "class=\"subtitle\" fill=\"#555555\"", buf);
    svg_frame(f, &ax, &ay, "activation peak (MiB, measured = predicted)", "step time (ms)");

    box budget_box = { 0, 0, 0, 0 };
    if (ab >= 0 && ab / MIB <= ax.hi) {
        double px = svg_map(&ax, ab / MIB);
        svg_line(f, px, B, px, T, "#d62728", 1.5, "6 4", "class=\"budget\"");
        char ab_s[32], lab[96];
        cli_fmt_bytes((uint64_t)ab, ab_s, sizeof ab_s);
        snprintf(lab, sizeof lab, "budget (activations %s)", ab_s);
        svg_text(f, px - 4, T + 14, "end", 11.5, 0, "fill=\"#d62728\"", lab);
        budget_box = (box){ px - 4 - svg_text_width(lab, 11.5), T + 2, px + 2, T + 17 };
    }

    /* the planner's front of each precision: a line through its schedules,
     * sorted by peak */
    for (int k = 0; k < r->nslot; k++) {
        const bench_slot *sl = &r->slot[k];
        if (!sl->n_front) continue;
        const char *col = front_color[k];
        fprintf(f, "<polyline class=\"front\" data-dtype=\"%s\" data-n=\"%zu\" fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"2\" stroke-linejoin=\"round\" points=\"", cli_dtype_name(o->dts[k]), sl->n_front, col);
        for (size_t i = 0; i < sl->n_front; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", svg_map(&ax, sl->front[i].peak_bytes / MIB),
                    svg_map(&ay, sl->front[i].step_ms_pred));
        fputs("\"/>\n", f);
        /* markers only while they stay apart; the line carries the rest */
        for (size_t i = 0; i < sl->n_front && sl->n_front <= 40; i++) {
            fprintf(f, "<circle class=\"front-point\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>",
                    svg_map(&ax, sl->front[i].peak_bytes / MIB), svg_map(&ay, sl->front[i].step_ms_pred), col);
            snprintf(buf, sizeof buf, "%s%s%.2f MiB, %.1f ms predicted: ", r->nslot > 1 ? cli_dtype_name(o->dts[k]) : "",
                     r->nslot > 1 ? " " : "", sl->front[i].peak_bytes / MIB, sl->front[i].step_ms_pred);
            svg_escape(f, buf);
            svg_escape(f, sl->front[i].policy);
            fputs("</title></circle>\n", f);
        }
    }

    /* predicted time of each benched policy: hollow markers, tied to the
     * measured point by a thin line */
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        if (w->step_ms_pred < 0) continue;
        double px = svg_map(&ax, w->st.act_peak_bytes / MIB);
        svg_line(f, px, svg_map(&ay, w->ms_median), px, svg_map(&ay, w->step_ms_pred), "#999999", 1, "2 2", NULL);
        svg_circle(f, px, svg_map(&ay, w->step_ms_pred), 4, "none", "#888888", "class=\"pred-point\"");
    }

    /* measured points, then their labels placed around them */
    box *taken = calloc((size_t)(2 * r->n + 2), sizeof *taken);
    if (!taken) return cli_error("out of memory");
    int nt = 0;
    if (budget_box.x1 > budget_box.x0) taken[nt++] = budget_box;
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        double px = svg_map(&ax, w->st.act_peak_bytes / MIB), py = svg_map(&ay, w->ms_median);
        fputs("<g class=\"point\" data-policy=\"", f);
        svg_escape(f, w->name);
        fprintf(f, "\" data-dtype=\"%s\">", cli_dtype_name(o->dts[w->slot]));
        if (w->optimal)
            fprintf(f, "<path d=\"M%.1f %.1fl7 7l-7 7l-7 -7z\" fill=\"#2ca02c\" stroke=\"#1b5e20\"/>", px, py - 7);
        else if (w->slot)   /* the second precision: squares */
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#ff7f0e\" stroke=\"#a34d00\"/>",
                    px - 5, py - 5);
        else
            svg_circle(f, px, py, 5, "#ff7f0e", "#a34d00", NULL);
        fputs("<title>", f);
        snprintf(buf, sizeof buf, "%.2f MiB, %.1f ms (x%.3f of none): ", w->st.act_peak_bytes / MIB, w->ms_median,
                 w->ratio_vs_none);
        svg_escape(f, buf);
        svg_escape(f, w->policy);
        fputs("</title></g>\n", f);
        taken[nt++] = (box){ px - 6, py - 6, px + 6, py + 6 };
    }
    box area = { L + 2, T + 2, R - 2, B - 2 };
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        double px = svg_map(&ax, w->st.act_peak_bytes / MIB), py = svg_map(&ay, w->ms_median);
        const char *anchor;
        double tx, ty;
        char lab[96];
        if (r->nslot > 1) snprintf(lab, sizeof lab, "%s %.60s", cli_dtype_name(o->dts[w->slot]), w->name);
        else snprintf(lab, sizeof lab, "%.60s", w->name);
        box lb = place_label(px, py, lab, 11.5, taken, nt, area, &anchor, &tx, &ty);
        taken[nt++] = lb;
        /* a leader from the point to the nearest spot of its label */
        double qx = fmax(lb.x0, fmin(px, lb.x1)), qy = fmax(lb.y0, fmin(py, lb.y1));
        double d = hypot(qx - px, qy - py);
        if (d > 9) svg_line(f, px + (qx - px) * 6 / d, py + (qy - py) * 6 / d, qx, qy, "#777777", 0.8, NULL, NULL);
        fputs("<text class=\"label\" data-policy=\"", f);
        svg_escape(f, w->name);
        fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" font-size=\"11.5\" text-anchor=\"%s\" fill=\"#222222\">", tx, ty, anchor);
        svg_escape(f, lab);
        fputs("</text>\n", f);
    }
    free(taken);

    /* legend */
    double lx = R + 24, ly = T + 4;
    fputs("<g class=\"legend\">\n", f);
    svg_text(f, lx, ly, "start", 13, 0, "font-weight=\"bold\"", "Legend");
    ly += 22;
    /* the markers of the measured points: circles for the first precision
     * benched, squares for the second */
    svg_circle(f, lx + 8, ly - 4, 5, "#ff7f0e", "#a34d00", NULL);
    if (r->nslot > 1) snprintf(buf, sizeof buf, "measured, %s (median)", cli_dtype_name(o->dts[0]));
    svg_text(f, lx + 22, ly, "start", 12, 0, NULL, r->nslot > 1 ? buf : "measured (median)");
    ly += 20;
    if (r->nslot > 1) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"#ff7f0e\" stroke=\"#a34d00\"/>\n",
                lx + 3, ly - 9);
        snprintf(buf, sizeof buf, "measured, %s (median)", cli_dtype_name(o->dts[1]));
        svg_text(f, lx + 22, ly, "start", 12, 0, NULL, buf);
        ly += 20;
    }
    if (o->budget) {
        fprintf(f, "<path d=\"M%.1f %.1fl7 7l-7 7l-7 -7z\" fill=\"#2ca02c\" stroke=\"#1b5e20\"/>\n", lx + 8, ly - 11);
        svg_text(f, lx + 22, ly, "start", 12, 0, NULL, "planner's optimum");
        ly += 20;
    }
    svg_circle(f, lx + 8, ly - 4, 4, "none", "#888888", NULL);
    svg_text(f, lx + 22, ly, "start", 12, 0, NULL, "predicted time, same policy");
    ly += 20;
    for (int k = 0; k < r->nslot; k++) {
        svg_line(f, lx, ly - 4, lx + 16, ly - 4, front_color[k], 2, NULL, NULL);
        svg_circle(f, lx + 8, ly - 4, 2.5, front_color[k], NULL, NULL);
        snprintf(buf, sizeof buf, "%s%s%s", r->slot[k].n_front ? "planner's predicted front" : "planner's front (unavailable)",
                 r->nslot > 1 ? ", " : "", r->nslot > 1 ? cli_dtype_name(o->dts[k]) : "");
        svg_text(f, lx + 22, ly, "start", 12, 0, NULL, buf);
        ly += 20;
    }
    if (ab >= 0) {
        svg_line(f, lx, ly - 4, lx + 16, ly - 4, "#d62728", 1.5, "6 4", NULL);
        svg_text(f, lx + 22, ly, "start", 12, 0, NULL, "memory budget");
        ly += 20;
    }
    ly += 10;
    svg_text(f, lx, ly, "start", 11, 0, "fill=\"#555555\"", "Lower left is better: less");
    svg_text(f, lx, ly + 15, "start", 11, 0, "fill=\"#555555\"", "memory, less time.  Front:");
    svg_text(f, lx, ly + 30, "start", 11, 0, "fill=\"#555555\"", "fastest schedule for each peak");
    svg_text(f, lx, ly + 45, "start", 11, 0, "fill=\"#555555\"", "(remat_plan_pareto).");
    for (int k = 0; k < r->nslot; k++)
        if (r->slot[k].gemm_gflops > 0) {
            snprintf(buf, sizeof buf, "GEMM %ld^3 %s: %.1f GFLOP/s", o->sgemm_n, cli_dtype_name(o->dts[k]), r->slot[k].gemm_gflops);
            svg_text(f, lx, ly + 70 + 15 * k, "start", 11, 0, "fill=\"#555555\"", buf);
        }
    fputs("</g>\n", f);
    svg_end(f);
    return 0;
}

/* ---- memory timeline ------------------------------------------------------- */

static const char *tensor_color(const remat_tensor_info *ti, int *k_act, int *k_glob, int *k_grad)
{
    static const char *act[] = { "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a",
                                 "#d62728", "#ff9896", "#9467bd", "#c5b0d5", "#8c564b", "#c49c94" };
    static const char *glob[] = { "#e377c2", "#f7b6d2", "#17becf", "#555555", "#c7c7c7" };
    static const char *grad[] = { "#bcbd22", "#dbdb8d", "#9edae5", "#393b79", "#637939", "#8c6d31",
                                  "#843c39", "#7b4173", "#5254a3" };
    if (ti->is_grad) return grad[(*k_grad)++ % (int)(sizeof grad / sizeof grad[0])];
    if (ti->per_layer) return act[(*k_act)++ % (int)(sizeof act / sizeof act[0])];
    return glob[(*k_glob)++ % (int)(sizeof glob / sizeof glob[0])];
}

/* the samples of one instruction (remat_schedule_walk_live's callback) */
typedef struct tl_walk {
    uint64_t *by, *prev, *tot;
    remat_instr_info *ins;
    int NT, NB;
} tl_walk;

static void tl_sample(void *arg, size_t i, const remat_instr_info *info, const uint64_t *cur)
{
    tl_walk *w = arg;
    int NT = w->NT;
    uint64_t *in_ = w->by + (2 * i) * (size_t)w->NB, *af = w->by + (2 * i + 1) * (size_t)w->NB, sum = 0;
    w->ins[i] = *info;
    for (int t = 0; t < NT; t++) {
        /* allocations precede frees inside an instruction, so the worst
         * moment holds every tensor's larger side */
        in_[t] = cur[t] > w->prev[t] ? cur[t] : w->prev[t];
        af[t] = cur[t];
        sum += in_[t];
        w->tot[2 * i + 1] += cur[t];
    }
    /* a buffer allocated and freed within one instruction (d_branch
     * with dropout) shows up only in the instruction's peak */
    in_[NT] = info->peak_bytes > sum ? info->peak_bytes - sum : 0;
    w->tot[2 * i] = sum + in_[NT];
    memcpy(w->prev, cur, sizeof(uint64_t) * (size_t)NT);
}

int bench_svg_timeline(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl)
{
    const int W = 960, H = 620;
    const double L = 90, R = W - 190, T = 112, B = H - 64;
    const bench_row *row = &r->rows[r->timeline_idx >= 0 ? r->timeline_idx : 0];
    const remat_config *c = &r->slot[row->slot].cfg;
    remat_schedule *s = NULL;
    int rc = 1, NT = remat_config_tensor_count(c), NB = NT + 1;   /* band NT: transient bytes */
    size_t n = 0, S = 0;
    uint64_t *by = NULL, *prev = NULL, *tot = NULL;
    remat_instr_info *ins = NULL;
    remat_tensor_info *ti = NULL;
    char buf[512], cfgs[200];

    if (remat_schedule_create(c, row->policy, &s)) return cli_error("timeline: %s", remat_errmsg());
    n = remat_schedule_length(s);
    S = 2 * n;
    by = calloc(S * (size_t)NB, sizeof *by);   /* by[sample * NB + band] */
    prev = calloc((size_t)NT, sizeof *prev);
    tot = calloc(S, sizeof *tot);
    ins = calloc(n, sizeof *ins);
    ti = calloc((size_t)NT, sizeof *ti);
    if (!by || !prev || !tot || !ins || !ti) { cli_error("out of memory"); goto out; }
    for (int t = 0; t < NT; t++)
        if (remat_tensor_get(c, t, &ti[t])) { cli_error("timeline: %s", remat_errmsg()); goto out; }

    /* samples 2i (worst moment inside instruction i) and 2i+1 (after it),
     * from one walk of the schedule */
    tl_walk tw = { by, prev, tot, ins, NT, NB };
    if (remat_schedule_walk_live(s, tl_sample, &tw)) { cli_error("timeline: %s", remat_errmsg()); goto out; }

    /* one plotted column per pixel at most: keep, in each bucket of
     * samples, the one with the most bytes (so the peak is never lost) */
    double plot_w = R - L;
    size_t per = S > (size_t)plot_w ? (S + (size_t)plot_w - 1) / (size_t)plot_w : 1, ncol = (S + per - 1) / per;
    size_t *rep = malloc(ncol * sizeof *rep);
    if (!rep) { cli_error("out of memory"); goto out; }
    for (size_t k = 0; k < ncol; k++) {
        size_t best = k * per;
        for (size_t j = k * per; j < (k + 1) * per && j < S; j++) if (tot[j] > tot[best]) best = j;
        rep[k] = best;
    }
    uint64_t peak = 0;
    size_t peak_s = 0;
    for (size_t j = 0; j < S; j++) if (tot[j] > peak) { peak = tot[j]; peak_s = j; }

    double ab = act_budget(o, r);
    double ymax = peak / MIB;
    if (ab >= 0 && ab <= 1.6 * peak) ymax = fmax(ymax, ab / MIB);
    svg_axis ax, ay;
    svg_axis_nice(&ax, 0, (double)n, 10, L, R);
    ax.lo = 0;
    ax.hi = (double)n;   /* the x axis ends where the step ends */
    svg_axis_nice(&ay, 0, ymax * 1.1, 8, B, T);
#define XS(sample) svg_map(&ax, (double)(sample) / 2.0)

    config_line(o, cfgs, sizeof cfgs);
    snprintf(buf, sizeof buf, "remat: memory timeline of one step, policy %.200s", row->name);
    svg_begin(f, W, H, xml_decl, buf);
    snprintf(buf, sizeof buf, "Memory timeline of one training step: %.200s", row->name);
    svg_text(f, L, 28, "start", 18, 0, "class=\"title\" font-weight=\"bold\"", buf);
    char pk[32], ms[32];
    cli_fmt_bytes(peak, pk, sizeof pk);
    cli_fmt_bytes(row->st.act_peak_bytes, ms, sizeof ms);
    svg_text(f, L, 48, "start", 12.5, 0, "class=\"subtitle\" fill=\"#555555\"", cfgs);
    snprintf(buf, sizeof buf, "live activation bytes by tensor name (all layers summed); predicted peak %s, "
             "measured %s%s", pk, ms, peak == row->st.act_peak_bytes ? " (equal)" : " (MISMATCH)");
    svg_text(f, L, 65, "start", 12.5, 0, "class=\"subtitle\" fill=\"#555555\"", buf);
    if (strcmp(row->name, row->policy)) {
        snprintf(buf, sizeof buf, "schedule: %.110s%s", row->policy, strlen(row->policy) > 110 ? "..." : "");
        svg_text(f, L, 82, "start", 11, 0, "fill=\"#777777\"", buf);
    }

    /* phases: frees belong to the phase around them */
    static const char *ph_name[] = { "forward", "backward", "recompute" };
    static const char *ph_fill[] = { "#e4eefa", "#fcebd6", "#ecdff5" };
    static const char *ph_strip[] = { "#8fb4e3", "#f0b26b", "#b48fd1" };
    int phase = 0, used[3] = { 0, 0, 0 };
    int *ph = malloc(n * sizeof *ph);
    if (!ph) { free(rep); cli_error("out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        switch (ins[i].kind) {
        case REMAT_I_FORWARD: phase = 0; break;
        case REMAT_I_BACKWARD: case REMAT_I_UPDATE: phase = 1; break;
        case REMAT_I_RECOMPUTE: phase = 2; break;
        default: break;
        }
        ph[i] = phase;
        used[phase] = 1;
    }
    fputs("<g class=\"phases\">\n", f);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && ph[j] == ph[i]) j++;
        double x0 = svg_map(&ax, (double)i), x1 = svg_map(&ax, (double)j);
        fprintf(f, "<rect class=\"phase %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                ph_name[ph[i]], x0, T, x1 - x0, B - T, ph_fill[ph[i]]);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\" fill=\"%s\"/>\n", x0, T - 10, x1 - x0,
                ph_strip[ph[i]]);
        i = j;
    }
    fputs("</g>\n", f);
    free(ph);
    svg_frame(f, &ax, &ay, "instruction of the step's schedule (left half: worst moment inside it, right half: after it)",
              "live activation bytes (MiB)");

    /* stacked bands, painted from the top of the stack down: band k is the
     * area under the cumulative sum through k, so each later (lower) band
     * covers all of it but its own slice */
    int present[64] = { 0 };
    const char *color[64];
    int ka = 0, kg = 0, kd = 0;
    for (int t = 0; t < NT && t < 63; t++) color[t] = tensor_color(&ti[t], &ka, &kg, &kd);
    color[NT] = "#b0b0b0";
    for (size_t j = 0; j < S; j++)
        for (int b = 0; b < NB && b < 64; b++) if (by[j * NB + b]) present[b] = 1;
    fputs("<g class=\"bands\">\n", f);
    for (int b = NB - 1; b >= 0; b--) {
        if (b >= 64 || !present[b]) continue;
        fprintf(f, "<path class=\"band\" data-tensor=\"%s\" fill=\"%s\" stroke=\"none\" d=\"M%.1f %.1f",
                b == NT ? "transient" : ti[b].name, color[b], XS(0), B);
        double lasty = B;
        for (size_t k = 0; k < ncol; k++) {
            uint64_t cum = 0;
            for (int q = 0; q <= b; q++) cum += by[rep[k] * NB + q];
            double y = svg_map(&ay, cum / MIB);
            if (fabs(y - lasty) >= 0.05) { fprintf(f, "V%.1f", y); lasty = y; }
            size_t end = (k + 1) * per < S ? (k + 1) * per : S;
            fprintf(f, "H%.1f", XS(end));
        }
        fprintf(f, "V%.1fZ\"/>\n", B);
    }
    fputs("</g>\n", f);

    /* the total as an outline, with the exact bytes for tests and tools */
    fputs("<polyline class=\"total\" fill=\"none\" stroke=\"#222222\" stroke-width=\"1\" data-bytes=\"", f);
    for (size_t k = 0; k < ncol; k++) fprintf(f, "%s%llu", k ? " " : "", (unsigned long long)tot[rep[k]]);
    fputs("\" points=\"", f);
    for (size_t k = 0; k < ncol; k++) {
        size_t end = (k + 1) * per < S ? (k + 1) * per : S;
        double y = svg_map(&ay, tot[rep[k]] / MIB);
        fprintf(f, "%s%.1f,%.1f %.1f,%.1f", k ? " " : "", XS(k * per), y, XS(end), y);
    }
    fputs("\"/>\n", f);

    /* the peak, labelled beside its marker on whichever side has room */
    box peak_box;
    {
        size_t i = peak_s / 2;
        double px = (XS(peak_s) + XS(peak_s + 1)) / 2, py = svg_map(&ay, peak / MIB);
        fprintf(f, "<path class=\"peak\" d=\"M%.1f %.1fl-5 -9h10z\" fill=\"#222222\"/>\n", px, py - 1);
        char where[128];
        if (ins[i].layer >= 0) snprintf(where, sizeof where, "%s of %s, layer %d", remat_instr_kind_name(ins[i].kind), ins[i].tensor, ins[i].layer);
        else snprintf(where, sizeof where, "%s of %s", remat_instr_kind_name(ins[i].kind), ins[i].tensor[0] ? ins[i].tensor : "parameters");
        snprintf(buf, sizeof buf, "peak %s at instruction %zu (%s)", pk, i, where);
        double w = svg_text_width(buf, 11.5) * 1.08, tx = px + 8;
        if (tx + w > R) tx = px - 8 - w;
        if (tx < L + 4) tx = fmax(L + 4, fmin(px - w / 2, R - w));
        svg_text(f, tx, py - 12, "start", 11.5, 0, "class=\"peak-label\" font-weight=\"bold\"", buf);
        peak_box = (box){ tx, py - 25, tx + w, py - 8 };
    }

    /* the budget line; its label goes where it does not cover the peak's */
    if (ab >= 0 && ab / MIB <= ay.hi) {
        double py = svg_map(&ay, ab / MIB);
        svg_line(f, L, py, R, py, "#d62728", 1.5, "6 4", "class=\"budget\"");
        char bb[32], tb[32];
        cli_fmt_bytes((uint64_t)ab, bb, sizeof bb);
        cli_fmt_bytes(o->budget, tb, sizeof tb);
        if (o->act_only) snprintf(buf, sizeof buf, "budget %s", bb);
        else snprintf(buf, sizeof buf, "budget %s: %s left for activations", tb, bb);
        double w = svg_text_width(buf, 11.5) * 1.08;
        const double cand[4][2] = { { R - 4 - w, py - 5 }, { L + 4, py - 5 }, { R - 4 - w, py + 15 }, { L + 4, py + 15 } };
        int k = 0;
        for (; k < 3; k++) {
            box b = { cand[k][0], cand[k][1] - 12, cand[k][0] + w, cand[k][1] + 2 };
            if (overlap(b, peak_box) == 0) break;
        }
        svg_text(f, cand[k][0], cand[k][1], "start", 11.5, 0, "fill=\"#d62728\"", buf);
    } else if (ab >= 0) {
        char tb[32];
        cli_fmt_bytes(o->budget, tb, sizeof tb);
        snprintf(buf, sizeof buf, "budget %s is above this plot", tb);
        svg_text(f, R - 4, T + 14, "end", 11.5, 0, "fill=\"#d62728\"", buf);
    }

    /* legend: bands in stack order (top first), then phases */
    double lx = R + 20, ly = T - 4;
    fputs("<g class=\"legend\">\n", f);
    svg_text(f, lx, ly, "start", 13, 0, "font-weight=\"bold\"", "Tensor (top first)");
    ly += 6;
    int nshown = 0;
    for (int b = NB - 1; b >= 0; b--) if (b < 64 && present[b]) nshown++;
    double step = nshown > 0 ? fmin(17, (B - 110 - ly) / nshown) : 17;
    for (int b = NB - 1; b >= 0; b--) {
        if (b >= 64 || !present[b]) continue;
        ly += step;
        svg_rect(f, lx, ly - 10, 12, 11, color[b], NULL);
        svg_text(f, lx + 18, ly, "start", fmin(11.5, step - 2), 0, NULL,
                 b == NT ? "transient" : ti[b].name);
    }
    ly += 24;
    svg_text(f, lx, ly, "start", 13, 0, "font-weight=\"bold\"", "Phase");
    for (int p = 0; p < 3; p++) {
        if (!used[p]) continue;
        ly += 17;
        svg_rect(f, lx, ly - 10, 12, 11, ph_strip[p], NULL);
        svg_text(f, lx + 18, ly, "start", 11.5, 0, NULL, ph_name[p]);
    }
    if (ab >= 0) {
        ly += 17;
        svg_line(f, lx, ly - 4, lx + 12, ly - 4, "#d62728", 1.5, "6 4", NULL);
        svg_text(f, lx + 18, ly, "start", 11.5, 0, NULL, "budget");
    }
    fputs("</g>\n", f);
    svg_end(f);
    free(rep);
    rc = 0;
#undef XS
out:
    remat_schedule_free(s);
    free(by); free(prev); free(tot); free(ins); free(ti);
    return rc;
}
