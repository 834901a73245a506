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

#define BUDGET_COLOR "#d62728"

/* a budget line, dashed */
static void budget_line(FILE *f, double x1, double y1, double x2, double y2, const char *attrs)
{
    svg_line(f, x1, y1, x2, y2, BUDGET_COLOR, 1.5, "6 4", attrs);
}

/* The marker of a measured point: a diamond for the planner's optimum, a
 * square for the second precision, else a circle; newline: end the line
 * (svg_circle always does). */
static void point_mark(FILE *f, int optimal, int slot, double cx, double cy, int newline)
{
    if (optimal) svg_diamond(f, cx, cy, "#2ca02c", "#1b5e20");
    else if (slot) svg_square(f, cx, cy, "#ff7f0e", "#a34d00");
    else { svg_circle(f, cx, cy, 5, "#ff7f0e", "#a34d00", NULL); return; }
    if (newline) fputc('\n', f);
}

/* the axes: to the largest peak and time, of the points, their
 * predictions and the fronts (and the budget, when it is near) */
static void pareto_axes(svg_plot *p, const bench_result *r, double ab)
{
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
    if (ab >= 0 && ab / MIB <= 1.5 * xmax) xmax = fmax(xmax, ab / MIB);
    svg_plot_axes(p, xmax * 1.06, 8, ymax * 1.08, 8);
}

/* the planner's front of each precision: a line through its schedules,
 * sorted by peak */
static void pareto_fronts(FILE *f, const svg_plot *p, const bench_opts *o, const bench_result *r)
{
    char buf[256];
    for (int k = 0; k < r->nslot; k++) {
        const bench_slot *sl = &r->slot[k];
        if (!sl->n_front) continue;
        const char *col = front_color[k];
        fprintf(f, "<polyline class=\"front\" data-dtype=\"%s\" data-n=\"%zu\" fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"2\" stroke-linejoin=\"round\" points=\"", cli_dtype_name(o->dts[k]), sl->n_front, col);
        for (size_t i = 0; i < sl->n_front; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", svg_map(&p->x, sl->front[i].peak_bytes / MIB),
                    svg_map(&p->y, sl->front[i].step_ms_pred));
        fputs("\"/>\n", f);
        /* markers only while they stay apart; the line carries the rest */
        for (size_t i = 0; i < sl->n_front && sl->n_front <= 40; i++) {
            fprintf(f, "<circle class=\"front-point\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>",
                    svg_map(&p->x, sl->front[i].peak_bytes / MIB), svg_map(&p->y, sl->front[i].step_ms_pred), col);
            snprintf(buf, sizeof buf, "%s%s%.2f MiB, %.1f ms predicted: ", r->nslot > 1 ? cli_dtype_name(o->dts[k]) : "",
                     r->nslot > 1 ? " " : "", sl->front[i].peak_bytes / MIB, sl->front[i].step_ms_pred);
            svg_escape(f, buf);
            svg_escape(f, sl->front[i].policy);
            fputs("</title></circle>\n", f);
        }
    }
}

/* predicted time of each benched policy: hollow markers, tied to the
 * measured point by a thin line */
static void pareto_predictions(FILE *f, const svg_plot *p, const bench_result *r)
{
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        if (w->step_ms_pred < 0) continue;
        double px = svg_map(&p->x, w->st.act_peak_bytes / MIB);
        svg_line(f, px, svg_map(&p->y, w->ms_median), px, svg_map(&p->y, w->step_ms_pred), "#999999", 1, "2 2", NULL);
        svg_circle(f, px, svg_map(&p->y, w->step_ms_pred), 4, "none", "#888888", "class=\"pred-point\"");
    }
}

/* measured points, then their labels placed around them, away from the
 * boxes in taken (nt of them; room for 2 per row more) */
static void pareto_points(FILE *f, const svg_plot *p, const bench_opts *o, const bench_result *r, box *taken, int nt)
{
    char buf[256];
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        double px = svg_map(&p->x, w->st.act_peak_bytes / MIB), py = svg_map(&p->y, w->ms_median);
        fputs("<g class=\"point\" data-policy=\"", f);
        svg_escape(f, w->name);
        fprintf(f, "\" data-dtype=\"%s\">", cli_dtype_name(o->dts[w->slot]));
        point_mark(f, w->optimal, w->slot, px, py, 0);
        fputs("<title>", f);
        snprintf(buf, sizeof buf, "%.2f MiB, %.1f ms (x%.3f of none): ", w->st.act_peak_bytes / MIB, w->ms_median,
                 w->ratio_vs_none);
        svg_escape(f, buf);
        svg_escape(f, w->policy);
        fputs("</title></g>\n", f);
        taken[nt++] = (box){ px - 6, py - 6, px + 6, py + 6 };
    }
    box area = { p->L + 2, p->T + 2, p->R - 2, p->B - 2 };
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        double px = svg_map(&p->x, w->st.act_peak_bytes / MIB), py = svg_map(&p->y, w->ms_median);
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
}

static void pareto_legend(FILE *f, const svg_plot *p, const bench_opts *o, const bench_result *r, double ab)
{
    char buf[256];
    svg_legend lg;
    double lx = p->R + 24, y;
    svg_legend_begin(&lg, f, lx, p->T + 4, 22, 12, "Legend");
    /* the markers of the measured points: circles for the first precision
     * benched, squares for the second */
    y = svg_legend_next(&lg, 22);
    point_mark(f, 0, 0, lx + 8, y - 4, 1);
    if (r->nslot > 1) snprintf(buf, sizeof buf, "measured, %s (median)", cli_dtype_name(o->dts[0]));
    svg_legend_label(&lg, r->nslot > 1 ? buf : "measured (median)");
    if (r->nslot > 1) {
        y = svg_legend_next(&lg, 20);
        point_mark(f, 0, 1, lx + 8, y - 4, 1);
        snprintf(buf, sizeof buf, "measured, %s (median)", cli_dtype_name(o->dts[1]));
        svg_legend_label(&lg, buf);
    }
    if (o->budget) {
        y = svg_legend_next(&lg, 20);
        point_mark(f, 1, 0, lx + 8, y - 4, 1);
        svg_legend_label(&lg, "planner's optimum");
    }
    y = svg_legend_next(&lg, 20);
    svg_circle(f, lx + 8, y - 4, 4, "none", "#888888", NULL);
    svg_legend_label(&lg, "predicted time, same policy");
    for (int k = 0; k < r->nslot; k++) {
        y = svg_legend_next(&lg, 20);
        svg_line(f, lx, y - 4, lx + 16, y - 4, front_color[k], 2, NULL, NULL);
        svg_circle(f, lx + 8, y - 4, 2.5, front_color[k], NULL, NULL);
        snprintf(buf, sizeof buf, "%s%s%s", r->slot[k].n_front ? "planner's predicted front" : "planner's front (unavailable)",
                 r->nslot > 1 ? ", " : "", r->nslot > 1 ? cli_dtype_name(o->dts[k]) : "");
        svg_legend_label(&lg, buf);
    }
    if (ab >= 0) {
        y = svg_legend_next(&lg, 20);
        budget_line(f, lx, y - 4, lx + 16, y - 4, NULL);
        svg_legend_label(&lg, "memory budget");
    }
    y = lg.y + 30;
    svg_text(f, lx, y, "start", 11, 0, "fill=\"#555555\"", "Lower left is better: less");
    svg_text(f, lx, y + 15, "start", 11, 0, "fill=\"#555555\"", "memory, less time.  Front:");
    svg_text(f, lx, y + 30, "start", 11, 0, "fill=\"#555555\"", "fastest schedule for each peak");
    svg_text(f, lx, y + 45, "start", 11, 0, "fill=\"#555555\"", "(remat_plan_pareto).");
    for (int k = 0; k < r->nslot; k++)
        if (r->slot[k].gemm_gflops > 0) {
            snprintf(buf, sizeof buf, "GEMM %ld^3 %s: %.1f GFLOP/s", o->sgemm_n, cli_dtype_name(o->dts[k]), r->slot[k].gemm_gflops);
            svg_text(f, lx, y + 70 + 15 * k, "start", 11, 0, "fill=\"#555555\"", buf);
        }
    svg_legend_end(&lg);
}

int bench_svg_pareto(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl)
{
    const int W = 960, H = 620;
    svg_plot p = { .L = 90, .R = W - 250, .T = 78, .B = H - 72 };
    char buf[256], cfgs[200];
    double ab = act_budget(o, r);
    pareto_axes(&p, r, ab);

    config_line(o, cfgs, sizeof cfgs);
    snprintf(buf, sizeof buf, "remat bench: activation peak vs step time (%s)", cfgs);
    svg_begin(f, W, H, xml_decl, buf);
    svg_title(f, p.L, 30, "Activation memory vs step time, per recomputation policy");
    snprintf(buf, sizeof buf, "%s | measured: median of %ld interleaved rounds, %d thread(s)", cfgs, o->steps,
             remat_get_threads());
    svg_subtitle(f, p.L, 52, buf);
    svg_frame(f, &p.x, &p.y, "activation peak (MiB, measured = predicted)", "step time (ms)");

    box *taken = calloc((size_t)(2 * r->n + 2), sizeof *taken);
    if (!taken) return cli_error("out of memory");
    int nt = 0;
    if (ab >= 0 && ab / MIB <= p.x.hi) {
        double px = svg_map(&p.x, ab / MIB);
        budget_line(f, px, p.B, px, p.T, "class=\"budget\"");
        char ab_s[32], lab[96];
        cli_fmt_bytes((uint64_t)ab, ab_s, sizeof ab_s);
        snprintf(lab, sizeof lab, "budget (activations %s)", ab_s);
        svg_text(f, px - 4, p.T + 14, "end", 11.5, 0, "fill=\"" BUDGET_COLOR "\"", lab);
        taken[nt++] = (box){ px - 4 - svg_text_width(lab, 11.5), p.T + 2, px + 2, p.T + 17 };
    }
    pareto_fronts(f, &p, o, r);
    pareto_predictions(f, &p, r);
    pareto_points(f, &p, o, r, taken, nt);
    free(taken);
    pareto_legend(f, &p, o, r, ab);
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

/* The samples of a step's schedule (tl_sample) and what is plotted of
 * them: one column per pixel at most. */
typedef struct timeline {
    size_t n, S;                /* instructions; samples: 2 per instruction */
    int NT, NB;                 /* tensors; bands: one per tensor, and the transient bytes */
    uint64_t *by, *prev, *tot;  /* by[sample * NB + band]; the totals per sample */
    remat_instr_info *ins;
    remat_tensor_info *ti;
    size_t per, ncol, *rep;     /* samples per column; columns; each column's sample (its largest) */
    uint64_t peak;
    size_t peak_s;
    int present[64];            /* bands that ever hold bytes */
    const char *color[64];
} timeline;

static void timeline_free(timeline *tl)
{
    free(tl->by); free(tl->prev); free(tl->tot); free(tl->ins); free(tl->ti); free(tl->rep);
}

/* samples 2i (worst moment inside instruction i) and 2i+1 (after it), from
 * one walk of the schedule of policy on c, bucketed into columns for plot_w
 * pixels; 0, or 1 (reported) */
static int timeline_sample(timeline *tl, const remat_config *c, const char *policy, double plot_w)
{
    remat_schedule *s = NULL;
    int rc = 1;
    memset(tl, 0, sizeof *tl);
    tl->NT = remat_config_tensor_count(c);
    tl->NB = tl->NT + 1;   /* band NT: transient bytes */
    if (remat_schedule_create(c, policy, &s)) return cli_error("timeline: %s", remat_errmsg());
    tl->n = remat_schedule_length(s);
    tl->S = 2 * tl->n;
    tl->by = calloc(tl->S * (size_t)tl->NB, sizeof *tl->by);
    tl->prev = calloc((size_t)tl->NT, sizeof *tl->prev);
    tl->tot = calloc(tl->S, sizeof *tl->tot);
    tl->ins = calloc(tl->n, sizeof *tl->ins);
    tl->ti = calloc((size_t)tl->NT, sizeof *tl->ti);
    if (!tl->by || !tl->prev || !tl->tot || !tl->ins || !tl->ti) { cli_error("out of memory"); goto out; }
    for (int t = 0; t < tl->NT; t++)
        if (remat_tensor_get(c, t, &tl->ti[t])) { cli_error("timeline: %s", remat_errmsg()); goto out; }
    tl_walk tw = { tl->by, tl->prev, tl->tot, tl->ins, tl->NT, tl->NB };
    if (remat_schedule_walk_live(s, tl_sample, &tw)) { cli_error("timeline: %s", remat_errmsg()); goto out; }

    /* one plotted column per pixel at most: keep, in each bucket of
     * samples, the one with the most bytes (so the peak is never lost) */
    size_t S = tl->S;
    tl->per = S > (size_t)plot_w ? (S + (size_t)plot_w - 1) / (size_t)plot_w : 1;
    tl->ncol = (S + tl->per - 1) / tl->per;
    if (!(tl->rep = malloc(tl->ncol * sizeof *tl->rep))) { cli_error("out of memory"); goto out; }
    for (size_t k = 0; k < tl->ncol; k++) {
        size_t best = k * tl->per;
        for (size_t j = k * tl->per; j < (k + 1) * tl->per && j < S; j++) if (tl->tot[j] > tl->tot[best]) best = j;
        tl->rep[k] = best;
    }
    for (size_t j = 0; j < S; j++) if (tl->tot[j] > tl->peak) { tl->peak = tl->tot[j]; tl->peak_s = j; }
    int ka = 0, kg = 0, kd = 0;
    for (int t = 0; t < tl->NT && t < 63; t++) tl->color[t] = tensor_color(&tl->ti[t], &ka, &kg, &kd);
    tl->color[tl->NT] = "#b0b0b0";
    for (size_t j = 0; j < S; j++)
        for (int b = 0; b < tl->NB && b < 64; b++) if (tl->by[j * tl->NB + b]) tl->present[b] = 1;
    rc = 0;
out:
    remat_schedule_free(s);
    return rc;
}

/* the x of sample j: instruction j/2's half */
static double tl_x(const svg_plot *p, size_t j) { return svg_map(&p->x, (double)j / 2.0); }

static const char *ph_name[] = { "forward", "backward", "recompute" };
static const char *ph_strip[] = { "#8fb4e3", "#f0b26b", "#b48fd1" };

/* phases: frees belong to the phase around them; used[] gets those seen */
static int timeline_phases(FILE *f, const svg_plot *p, const timeline *tl, int used[3])
{
    static const char *ph_fill[] = { "#e4eefa", "#fcebd6", "#ecdff5" };
    int phase = 0;
    int *ph = malloc(tl->n * sizeof *ph);
    if (!ph) return cli_error("out of memory");
    for (size_t i = 0; i < tl->n; i++) {
        switch (tl->ins[i].kind) {
        case REMAT_I_FORWARD: phase = 0; break;
        case REMAT_I_BACKWARD: case REMAT_I_UPDATE: phase = 1; break;
        case REMAT_I_RECOMPUTE: phase = 2; break;
        default: break;
        }
        ph[i] = phase;
        used[phase] = 1;
    }
    fputs("<g class=\"phases\">\n", f);
    for (size_t i = 0; i < tl->n;) {
        size_t j = i;
        while (j < tl->n && ph[j] == ph[i]) j++;
        double x0 = svg_map(&p->x, (double)i), x1 = svg_map(&p->x, (double)j);
        fprintf(f, "<rect class=\"phase %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                ph_name[ph[i]], x0, p->T, x1 - x0, p->B - p->T, ph_fill[ph[i]]);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\" fill=\"%s\"/>\n", x0, p->T - 10, x1 - x0,
                ph_strip[ph[i]]);
        i = j;
    }
    fputs("</g>\n", f);
    free(ph);
    return 0;
}

/* stacked bands, painted from the top of the stack down: band k is the
 * area under the cumulative sum through k, so each later (lower) band
 * covers all of it but its own slice; then the total as an outline, with
 * the exact bytes for tests and tools */
static void timeline_bands(FILE *f, const svg_plot *p, const timeline *tl)
{
    size_t S = tl->S, per = tl->per;
    int NB = tl->NB;
    fputs("<g class=\"bands\">\n", f);
    for (int b = NB - 1; b >= 0; b--) {
        if (b >= 64 || !tl->present[b]) continue;
        fprintf(f, "<path class=\"band\" data-tensor=\"%s\" fill=\"%s\" stroke=\"none\" d=\"M%.1f %.1f",
                b == tl->NT ? "transient" : tl->ti[b].name, tl->color[b], tl_x(p, 0), p->B);
        double lasty = p->B;
        for (size_t k = 0; k < tl->ncol; k++) {
            uint64_t cum = 0;
            for (int q = 0; q <= b; q++) cum += tl->by[tl->rep[k] * NB + q];
            double y = svg_map(&p->y, cum / MIB);
            if (fabs(y - lasty) >= 0.05) { fprintf(f, "V%.1f", y); lasty = y; }
            size_t end = (k + 1) * per < S ? (k + 1) * per : S;
            fprintf(f, "H%.1f", tl_x(p, end));
        }
        fprintf(f, "V%.1fZ\"/>\n", p->B);
    }
    fputs("</g>\n", f);
    fputs("<polyline class=\"total\" fill=\"none\" stroke=\"#222222\" stroke-width=\"1\" data-bytes=\"", f);
    for (size_t k = 0; k < tl->ncol; k++) fprintf(f, "%s%llu", k ? " " : "", (unsigned long long)tl->tot[tl->rep[k]]);
    fputs("\" points=\"", f);
    for (size_t k = 0; k < tl->ncol; k++) {
        size_t end = (k + 1) * per < S ? (k + 1) * per : S;
        double y = svg_map(&p->y, tl->tot[tl->rep[k]] / MIB);
        fprintf(f, "%s%.1f,%.1f %.1f,%.1f", k ? " " : "", tl_x(p, k * per), y, tl_x(p, end), y);
    }
    fputs("\"/>\n", f);
}

/* the peak, labelled beside its marker on whichever side has room; the
 * label's box */
static box timeline_peak(FILE *f, const svg_plot *p, const timeline *tl, const char *pk)
{
    char where[128], buf[512];
    size_t i = tl->peak_s / 2;
    const remat_instr_info *in = &tl->ins[i];
    double px = (tl_x(p, tl->peak_s) + tl_x(p, tl->peak_s + 1)) / 2, py = svg_map(&p->y, tl->peak / MIB);
    fprintf(f, "<path class=\"peak\" d=\"M%.1f %.1fl-5 -9h10z\" fill=\"#222222\"/>\n", px, py - 1);
    if (in->layer >= 0) snprintf(where, sizeof where, "%s of %s, layer %d", remat_instr_kind_name(in->kind), in->tensor, in->layer);
    else snprintf(where, sizeof where, "%s of %s", remat_instr_kind_name(in->kind), in->tensor[0] ? in->tensor : "parameters");
    snprintf(buf, sizeof buf, "peak %s at instruction %zu (%s)", pk, i, where);
    double w = svg_text_width(buf, 11.5) * 1.08, tx = px + 8;
    if (tx + w > p->R) tx = px - 8 - w;
    if (tx < p->L + 4) tx = fmax(p->L + 4, fmin(px - w / 2, p->R - w));
    svg_text(f, tx, py - 12, "start", 11.5, 0, "class=\"peak-label\" font-weight=\"bold\"", buf);
    return (box){ tx, py - 25, tx + w, py - 8 };
}

/* the budget line (ab: its activations' share); its label goes where it
 * does not cover the peak's */
static void timeline_budget(FILE *f, const svg_plot *p, const bench_opts *o, double ab, box peak_box)
{
    char buf[512], bb[32], tb[32];
    cli_fmt_bytes(o->budget, tb, sizeof tb);
    if (ab / MIB > p->y.hi) {
        snprintf(buf, sizeof buf, "budget %s is above this plot", tb);
        svg_text(f, p->R - 4, p->T + 14, "end", 11.5, 0, "fill=\"" BUDGET_COLOR "\"", buf);
        return;
    }
    double py = svg_map(&p->y, ab / MIB);
    budget_line(f, p->L, py, p->R, py, "class=\"budget\"");
    cli_fmt_bytes((uint64_t)ab, bb, sizeof bb);
    if (o->act_only) snprintf(buf, sizeof buf, "budget %s", bb);
    else snprintf(buf, sizeof buf, "budget %s: %s left for activations", tb, bb);
    double w = svg_text_width(buf, 11.5) * 1.08;
    const double cand[4][2] = { { p->R - 4 - w, py - 5 }, { p->L + 4, py - 5 }, { p->R - 4 - w, py + 15 }, { p->L + 4, py + 15 } };
    int k = 0;
    for (; k < 3; k++) {
        box b = { cand[k][0], cand[k][1] - 12, cand[k][0] + w, cand[k][1] + 2 };
        if (overlap(b, peak_box) == 0) break;
    }
    svg_text(f, cand[k][0], cand[k][1], "start", 11.5, 0, "fill=\"" BUDGET_COLOR "\"", buf);
}

/* legend: bands in stack order (top first), then phases */
static void timeline_legend(FILE *f, const svg_plot *p, const timeline *tl, const int used[3], double ab)
{
    svg_legend lg;
    double lx = p->R + 20, y;
    svg_legend_begin(&lg, f, lx, p->T - 4, 18, 11.5, "Tensor (top first)");
    lg.y += 6;
    int nshown = 0;
    for (int b = tl->NB - 1; b >= 0; b--) if (b < 64 && tl->present[b]) nshown++;
    double step = nshown > 0 ? fmin(17, (p->B - 110 - lg.y) / nshown) : 17;
    lg.size = fmin(11.5, step - 2);
    for (int b = tl->NB - 1; b >= 0; b--) {
        if (b >= 64 || !tl->present[b]) continue;
        y = svg_legend_next(&lg, step);
        svg_rect(f, lx, y - 10, 12, 11, tl->color[b], NULL);
        svg_legend_label(&lg, b == tl->NT ? "transient" : tl->ti[b].name);
    }
    lg.size = 11.5;
    svg_legend_heading(&lg, 24, "Phase");
    for (int ph = 0; ph < 3; ph++) {
        if (!used[ph]) continue;
        y = svg_legend_next(&lg, 17);
        svg_rect(f, lx, y - 10, 12, 11, ph_strip[ph], NULL);
        svg_legend_label(&lg, ph_name[ph]);
    }
    if (ab >= 0) {
        y = svg_legend_next(&lg, 17);
        budget_line(f, lx, y - 4, lx + 12, y - 4, NULL);
        svg_legend_label(&lg, "budget");
    }
    svg_legend_end(&lg);
}

int bench_svg_timeline(FILE *f, const bench_opts *o, const bench_result *r, int xml_decl)
{
    const int W = 960, H = 620;
    svg_plot p = { .L = 90, .R = W - 190, .T = 112, .B = H - 64 };
    const bench_row *row = &r->rows[r->timeline_idx >= 0 ? r->timeline_idx : 0];
    timeline tl;
    char buf[512], cfgs[200], pk[32], ms[32];
    int rc = 1, used[3] = { 0, 0, 0 };
    if (timeline_sample(&tl, &r->slot[row->slot].cfg, row->policy, p.R - p.L)) goto out;
    double ab = act_budget(o, r);
    double ymax = tl.peak / MIB;
    if (ab >= 0 && ab <= 1.6 * tl.peak) ymax = fmax(ymax, ab / MIB);
    svg_plot_axes(&p, (double)tl.n, 10, ymax * 1.1, 8);
    p.x.lo = 0;
    p.x.hi = (double)tl.n;   /* the x axis ends where the step ends */

    config_line(o, cfgs, sizeof cfgs);
    snprintf(buf, sizeof buf, "remat: memory timeline of one step, policy %.200s", row->name);
    svg_begin(f, W, H, xml_decl, buf);
    snprintf(buf, sizeof buf, "Memory timeline of one training step: %.200s", row->name);
    svg_title(f, p.L, 28, buf);
    cli_fmt_bytes(tl.peak, pk, sizeof pk);
    cli_fmt_bytes(row->st.act_peak_bytes, ms, sizeof ms);
    svg_subtitle(f, p.L, 48, cfgs);
    snprintf(buf, sizeof buf, "live activation bytes by tensor name (all layers summed); predicted peak %s, "
             "measured %s%s", pk, ms, tl.peak == row->st.act_peak_bytes ? " (equal)" : " (MISMATCH)");
    svg_subtitle(f, p.L, 65, buf);
    if (strcmp(row->name, row->policy)) {
        snprintf(buf, sizeof buf, "schedule: %.110s%s", row->policy, strlen(row->policy) > 110 ? "..." : "");
        svg_text(f, p.L, 82, "start", 11, 0, "fill=\"#777777\"", buf);
    }
    if (timeline_phases(f, &p, &tl, used)) goto out;
    svg_frame(f, &p.x, &p.y, "instruction of the step's schedule (left half: worst moment inside it, right half: after it)",
              "live activation bytes (MiB)");
    timeline_bands(f, &p, &tl);
    box peak_box = timeline_peak(f, &p, &tl, pk);
    if (ab >= 0) timeline_budget(f, &p, o, ab, peak_box);
    timeline_legend(f, &p, &tl, used, ab);
    svg_end(f);
    rc = 0;
out:
    timeline_free(&tl);
    return rc;
}
