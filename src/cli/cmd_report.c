/*
 * cmd_report.c -- `remat report --out DIR [bench flags]`: runs the bench
 * (cmd_bench.c) and writes DIR/report.html, one self-contained page for a
 * design review: the two plots inline as SVG, the table, the config, the
 * machine (CPU model, threads, BLAS and the core type it chose), the method,
 * the planner's front and the raw JSON.  No scripts, no external files.
 * The page's fixed text is src/cli/report.html, compiled in (report_html[]:
 * the Makefile quotes it); its "@@name@@" slots are filled here.
 *
 * The page is well-formed XML as well as HTML (every element closed, only
 * numeric character references), so tests can parse it with any XML parser.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench.h"
#include "report_html.h"   /* report_html[]: src/cli/report.html, made by the Makefile */

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') fputc(' ', f);
            else fputc(*s, f);
        }
    }
}

static void kv(FILE *f, const char *k, const char *v)
{
    fputs("<tr><th>", f);
    esc(f, k);
    fputs("</th><td>", f);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

static const char *mib(uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f", b / 1048576.0);
    return buf;
}

/* One step of the timeline policy's trace (the round of median time): its
 * ten longest instructions and the share of its time spent recomputing. */
static void trace_summary(FILE *f, const bench_opts *o, const bench_result *r)
{
    const bench_row *w = r->timeline_idx >= 0 ? &r->rows[r->timeline_idx] : NULL;
    size_t ns = w && w->trace ? remat_trace_steps(w->trace) : 0;
    remat_trace_step st, pick;
    memset(&pick, 0, sizeof pick);
    double durs[1024];
    size_t n = 0;
    if (!ns) return;
    for (size_t k = 0; k < ns && n < 1024; k++)
        if (!remat_trace_step_get(w->trace, k, &st) && st.ok) durs[n++] = st.dur_ms;
    if (!n) return;
    double med = cli_median(durs, (int)n), best = 1e300;
    for (size_t k = 0; k < ns; k++)
        if (!remat_trace_step_get(w->trace, k, &st) && st.ok && fabs(st.dur_ms - med) < best) { best = fabs(st.dur_ms - med); pick = st; }
    enum { TOP = 10 };
    remat_trace_event top[TOP], e;
    int nt = 0;
    double rec = 0, inside = 0;
    for (size_t j = pick.first; j < pick.first + pick.count; j++) {
        if (remat_trace_event_get(w->trace, j, &e)) continue;
        inside += e.dur_ms;
        if (e.kind == REMAT_I_RECOMPUTE) rec += e.dur_ms;
        int at = nt < TOP ? nt++ : TOP;   /* insertion into the ten longest */
        while (at > 0 && top[at - 1].dur_ms < e.dur_ms) { if (at < TOP) top[at] = top[at - 1]; at--; }
        if (at < TOP) top[at] = e;
    }
    char b[512];
    fputs("<h2>One step, instruction by instruction</h2>\n<p class=\"meta\">", f);
    snprintf(b, sizeof b, "Policy %s, round %llu (the round of median step time, %.1f ms, %zu instructions). "
             "Recomputation took %.1f ms: %.1f%% of the step. The longest instructions:", w->name,
             (unsigned long long)pick.step, pick.dur_ms, pick.count, rec, pick.dur_ms > 0 ? 100 * rec / pick.dur_ms : 0.0);
    esc(f, b);
    fputs("</p>\n<table class=\"trace\">\n<thead><tr><th>#</th><th class=\"l\">instruction</th><th>layer</th>"
          "<th>ms</th><th>% of step</th><th>GFLOP/s</th></tr></thead>\n<tbody>\n", f);
    for (int k = 0; k < nt; k++) {
        char lay[16];
        if (top[k].layer < 0) snprintf(lay, sizeof lay, "–"); else snprintf(lay, sizeof lay, "%d", top[k].layer);
        fprintf(f, "<tr><td>%zu</td><td class=\"l\">%s %s</td><td>%s</td><td>%.3f</td><td>%.1f</td><td>%.1f</td></tr>\n",
                top[k].index, remat_instr_kind_name(top[k].kind), top[k].tensor, lay, top[k].dur_ms,
                pick.dur_ms > 0 ? 100 * top[k].dur_ms / pick.dur_ms : 0.0,
                top[k].dur_ms > 0 ? top[k].flops / (top[k].dur_ms * 1e6) : 0.0);
    }
    fputs("</tbody>\n</table>\n<p class=\"meta\">", f);
    snprintf(b, sizeof b, "The instructions account for %.1f ms of the step; the rest is copying the batch in, releasing "
             "buffers and the time between instructions. %s", inside,
             o->trace_dir ? "Every round of every policy is in the traces written by --trace (Chrome trace-event JSON: "
                            "Perfetto, chrome://tracing, or docs/trace-view.html)." :
                            "Add --trace DIR to keep every round of every policy as Chrome trace-event JSON.");
    esc(f, b);
    fputs("</p>\n", f);
}

/* What the page's slots are filled from (report.html, "@@name@@") */
typedef struct page {
    const bench_opts *o;
    const bench_result *r;
    const char *pareto, *timeline, *json;   /* the two plots as SVG, the bench's JSON */
} page;

static void fill_title(FILE *f, const page *p)
{
    const remat_config *c = &p->o->cfg;
    char b[256];
    snprintf(b, sizeof b, "remat report: %d layers, dim %d, batch %d x seq %d", c->n_layer, c->n_embd, c->batch, c->seq);
    esc(f, b);
}

static void fill_generated(FILE *f, const page *p)
{
    char b[1024], when[64];
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tmv);
    snprintf(b, sizeof b, "Generated %s by remat %s in %.1f s. Command: ", when, remat_version(), p->r->elapsed_s);
    esc(f, b);
    fputs("<code>remat", f);
    for (int i = 0; i < p->o->argc; i++) { fputc(' ', f); esc(f, p->o->argv[i]); }
    fputs("</code>", f);
}

/* one row of the results table per policy run */
static void fill_results(FILE *f, const page *p)
{
    const bench_opts *o = p->o;
    const bench_result *r = p->r;
    for (int i = 0; i < r->n; i++) {
        const bench_row *w = &r->rows[i];
        fprintf(f, "<tr%s data-policy=\"", w->optimal ? " class=\"opt\"" : w->implicit ? " class=\"ref\"" : "");
        esc(f, w->name);
        fputs("\"><td class=\"l\">", f);
        if (r->nslot > 1) { esc(f, cli_dtype_name(o->dts[w->slot])); esc(f, " "); }
        esc(f, w->name);
        if (w->optimal || strcmp(w->name, w->policy)) {
            fputs("<br/><code>", f);
            esc(f, w->policy);
            fputs("</code>", f);
        }
        char rss[32], pred[32], err[32], mb[4][32];
        if (w->rss_peak) mib(w->rss_peak, rss, sizeof rss); else snprintf(rss, sizeof rss, "–");
        if (w->step_ms_pred >= 0) snprintf(pred, sizeof pred, "%.1f", w->step_ms_pred); else snprintf(pred, sizeof pred, "–");
        if (w->step_ms_pred >= 0 && w->ms_median > 0)
            snprintf(err, sizeof err, "%+.1f%%", 100.0 * (w->step_ms_pred - w->ms_median) / w->ms_median);
        else snprintf(err, sizeof err, "–");
        fprintf(f, "</td><td>%.1f</td><td>%.3f</td><td>%.0f</td><td>%s</td><td>%s%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td>%.2f</td><td>%.1f</td><td>%s</td><td>%s</td></tr>\n",
                w->ms_median, w->ratio_vs_none, w->tokens_per_s, mib(w->st.act_peak_bytes, mb[0], 32),
                mib(w->sim.peak_bytes, mb[1], 32), w->sim.peak_bytes == w->st.act_peak_bytes ? "" : " (MISMATCH)",
                mib(w->st.act_stored_bytes, mb[2], 32), mib(w->st.act_workset_bytes, mb[3], 32), rss, w->gflops,
                100.0 * w->gemm_frac, pred, err);
    }
}

/* how the results were measured and what the planner said */
static void fill_results_notes(FILE *f, const page *p)
{
    const bench_opts *o = p->o;
    const bench_result *r = p->r;
    char b[1024], b2[64], b3[64];
    snprintf(b, sizeof b, "Times are medians over %ld interleaved rounds (after %ld warm-up rounds); × none is the "
             "median of per-round ratios. Activation bytes are exact (accounting allocator); predicted is the dry "
             "run of the schedule. ", o->steps, o->warmup);
    esc(f, b);
    if (r->rss_base) {
        snprintf(b, sizeof b, "RSS peak: each policy in a process of its own (model + one step), %s MiB of which is "
                 "the process before the model. ", mib(r->rss_base, b2, sizeof b2));
        esc(f, b);
    } else esc(f, "RSS peak: not measured (--no-rss). ");
    snprintf(b, sizeof b, "%% GEMM: achieved GFLOP/s over a %ld³ GEMM of the same precision and engine (%s) "
             "measured in the same rounds (", o->sgemm_n, remat_gemm_name(remat_gemm_get()));
    esc(f, b);
    for (int k = 0; k < r->nslot; k++) {
        snprintf(b, sizeof b, "%s%s %.1f GFLOP/s", k ? ", " : "", cli_dtype_name(o->dts[k]), r->slot[k].gemm_gflops);
        esc(f, b);
    }
    snprintf(b, sizeof b, "). Planner ms: the step time the planner predicts (%s); time error: predicted against "
             "measured.", r->slot[0].profile_desc);
    esc(f, b);
    if (r->rows[r->slot[0].none_idx].implicit) esc(f, " none was measured as the reference.");
    for (int k = 0; k < r->nslot; k++) {
        const bench_slot *sl = &r->slot[k];
        char in[16] = "";
        if (r->nslot > 1) snprintf(in, sizeof in, " %s:", cli_dtype_name(o->dts[k]));
        if (o->budget) {
            cli_fmt_bytes(o->budget, b3, sizeof b3);
            if (sl->optimal_err[0])
                snprintf(b, sizeof b, "%s Budget %s%s: no optimum: %s", in, b3, o->act_only ? " (activations)" : "",
                         sl->optimal_err);
            else snprintf(b, sizeof b, "%s Budget %s%s: the green row is the planner's fastest schedule that fits.", in,
                          b3, o->act_only ? " (activations)" : "");
            esc(f, b);
        }
        if (sl->planner_err[0]) {
            snprintf(b, sizeof b, "%s Planner predictions incomplete: %s", in, sl->planner_err);
            esc(f, b);
        }
    }
}

static void fill_trace(FILE *f, const page *p) { trace_summary(f, p->o, p->r); }
static void fill_pareto(FILE *f, const page *p) { fputs(p->pareto, f); }
static void fill_timeline(FILE *f, const page *p) { fputs(p->timeline, f); }
static void fill_json(FILE *f, const page *p) { esc(f, p->json); }

static void fill_config(FILE *f, const page *p)
{
    const bench_opts *o = p->o;
    const remat_config *c = &o->cfg;
    const bench_row *r0 = &p->r->rows[0];
    char b[1024], b2[64], p1[32], p2[32], p3[32];
    snprintf(b, sizeof b, "%d", c->n_layer); kv(f, "layers", b);
    snprintf(b, sizeof b, "%d", c->n_embd); kv(f, "width (dim)", b);
    snprintf(b, sizeof b, "%d", c->n_head); kv(f, "heads", b);
    snprintf(b, sizeof b, "%d (padded %d)", c->vocab, remat_config_padded_vocab(c)); kv(f, "vocabulary", b);
    snprintf(b, sizeof b, "%d x %d (max seq %d)", c->batch, c->seq, c->max_seq); kv(f, "batch x seq", b);
    snprintf(b, sizeof b, "%g", (double)c->dropout); kv(f, "dropout", b);
    snprintf(b, sizeof b, "%llu", (unsigned long long)remat_config_num_params(c)); kv(f, "parameters", b);
    snprintf(b, sizeof b, "params %s MiB, grads %s MiB, AdamW %s MiB", mib(r0->st.params_bytes, p1, 32),
             mib(r0->st.grads_bytes, p2, 32), mib(r0->st.optim_bytes, p3, 32));
    kv(f, "fixed memory", b);
    snprintf(b, sizeof b, "%ld timed rounds, %ld warm-up, seed %llu", o->steps, o->warmup, (unsigned long long)o->seed);
    kv(f, "measurement", b);
    if (o->budget) {
        cli_fmt_bytes(o->budget, b2, sizeof b2);
        snprintf(b, sizeof b, "%s%s", b2, o->act_only ? " (activation peak only)" : " (whole step)");
        kv(f, "budget", b);
    }
    kv(f, "planner profile", p->r->slot[0].profile_desc);
    if (p->r->nslot > 1)
        snprintf(b, sizeof b, "%s and %s (each against its own none)", cli_dtype_name(o->dts[0]), cli_dtype_name(o->dts[1]));
    else snprintf(b, sizeof b, "%s%s", cli_dtype_name(o->dts[0]), o->dts[0] == REMAT_DTYPE_BF16 ? " (mixed precision)" : "");
    kv(f, "precisions", b);
}

static void fill_machine(FILE *f, const page *p)
{
    const bench_opts *o = p->o;
    const bench_result *r = p->r;
    char b[1024], b2[64];
    kv(f, "CPU", r->cpu);
    snprintf(b, sizeof b, "%ld online, %d used", sysconf(_SC_NPROCESSORS_ONLN), remat_get_threads());
    kv(f, "cores / threads", b);
    kv(f, "BLAS", remat_blas_info());
    kv(f, "BLAS core type", remat_blas_core()[0] ? remat_blas_core() : "not reported");
    kv(f, "GEMM engine", remat_gemm_name(remat_gemm_get()));
    for (int k = 0; k < r->nslot; k++) {
        snprintf(b, sizeof b, "%.1f GFLOP/s (%ld³, median of %ld rounds)", r->slot[k].gemm_gflops, o->sgemm_n, o->steps);
        snprintf(b2, sizeof b2, "GEMM probe, %s", cli_dtype_name(o->dts[k]));
        kv(f, b2, b);
    }
    if (r->load_start >= 0 && r->load_end >= 0) {
        snprintf(b, sizeof b, "%.2f at the start, %.2f at the end (1-minute load average: how busy the machine was)",
                 r->load_start, r->load_end);
        kv(f, "load", b);
    }
    kv(f, "remat", remat_version());
}

/* the planner's front of each precision, folded */
static void fill_fronts(FILE *f, const page *p)
{
    const bench_opts *o = p->o;
    const bench_result *r = p->r;
    char b2[64];
    for (int q = 0; q < r->nslot; q++) {
        const bench_slot *sl = &r->slot[q];
        if (!sl->n_front) continue;
        /* a long front is shown as at most 41 rows spread evenly over it,
         * both ends included; the raw JSON below has all of it */
        size_t shown = sl->n_front < 41 ? sl->n_front : 41;
        fprintf(f, "<details><summary>Planner front%s%s (%zu schedules, predicted%s)</summary>\n<table class=\"front\">\n"
                   "<thead><tr><th>act peak MiB</th><th>predicted ms</th><th class=\"l\">policy</th></tr></thead>\n<tbody>\n",
                r->nslot > 1 ? ", " : "", r->nslot > 1 ? cli_dtype_name(o->dts[q]) : "", sl->n_front,
                shown < sl->n_front ? "; 41 of them, evenly spread" : "");
        for (size_t k = 0; k < shown; k++) {
            size_t i = shown > 1 ? k * (sl->n_front - 1) / (shown - 1) : 0;
            fprintf(f, "<tr><td>%s</td><td>%.1f</td><td class=\"l\"><code>", mib(sl->front[i].peak_bytes, b2, 32),
                    sl->front[i].step_ms_pred);
            esc(f, sl->front[i].policy);
            fputs("</code></td></tr>\n", f);
        }
        fputs("</tbody>\n</table>\n</details>\n", f);
    }
}

/* The page: report.html (the Makefile compiles it in as report_html[])
 * with each "@@name@@" replaced by what its filler writes.  0, or 1
 * (reported) for a slot no filler has. */
static int write_html(FILE *f, const page *p)
{
    static const struct { const char *name; void (*fill)(FILE *, const page *); } slots[] = {
        {"title", fill_title}, {"generated", fill_generated}, {"results", fill_results},
        {"results_notes", fill_results_notes}, {"trace", fill_trace}, {"pareto", fill_pareto},
        {"timeline", fill_timeline}, {"config", fill_config}, {"machine", fill_machine}, {"fronts", fill_fronts},
        {"json", fill_json},
    };
    const char *s = report_html, *at, *end;
    for (; (at = strstr(s, "@@")) && (end = strstr(at + 2, "@@")); s = end + 2) {
        fwrite(s, 1, (size_t)(at - s), f);
        size_t k = 0, len = (size_t)(end - at - 2);
        while (k < sizeof slots / sizeof slots[0] && (strlen(slots[k].name) != len || memcmp(slots[k].name, at + 2, len))) k++;
        if (k == sizeof slots / sizeof slots[0]) return cli_error("report.html: no filler for slot '%.*s'", (int)len, at + 2);
        slots[k].fill(f, p);
    }
    fputs(s, f);
    return 0;
}

static int render_json(FILE *f, const bench_opts *o, const bench_result *r, int unused)
{
    return bench_print_json(f, o, r);
}

int cmd_report(int argc, char **argv)
{
    bench_opts o;
    bench_result r;
    int p = bench_parse("report", argc, argv, 1, &o);
    if (p <= 0) return p < 0 ? 2 : 0;
    if (cli_mkdirs("--out", o.out_dir) || bench_check_outputs(&o)) return 1;
    int rc = bench_run(&o, &r);
    if (rc) { bench_result_free(&r); return rc; }
    char *pareto = NULL, *timeline = NULL, *json = NULL, *html = NULL, path[4096];
    size_t n1, n2, n3, n4;
    if ((rc = bench_render(bench_svg_pareto, &o, &r, 0, &pareto, &n1))) goto out;
    if ((rc = bench_render(bench_svg_timeline, &o, &r, 0, &timeline, &n2))) goto out;
    if ((rc = bench_render(render_json, &o, &r, 0, &json, &n3))) goto out;
    FILE *f = open_memstream(&html, &n4);
    if (!f) { rc = cli_error("out of memory"); goto out; }
    page pg = { &o, &r, pareto, timeline, json };
    int hrc = write_html(f, &pg);
    if (fclose(f)) { rc = cli_error("out of memory"); goto out; }
    if ((rc = hrc)) goto out;
    if (snprintf(path, sizeof path, "%s/report.html", o.out_dir) >= (int)sizeof path) { rc = cli_error("--out: path too long"); goto out; }
    if ((rc = cli_write_atomic(path, html, n4))) goto out;
    if (o.svg_pareto && (rc = bench_write_svg(o.svg_pareto, bench_svg_pareto, &o, &r))) goto out;
    if (o.svg_timeline && (rc = bench_write_svg(o.svg_timeline, bench_svg_timeline, &o, &r))) goto out;
    if (o.trace_dir && (rc = bench_write_traces(&o, &r))) goto out;
    if (o.json) fputs(json, stdout);
    else if (o.csv) bench_print_csv(stdout, &o, &r);
    else {
        bench_print_table(stdout, &o, &r);
        printf("\nreport: %s\n", path);
    }
out:
    free(pareto); free(timeline); free(json); free(html);
    bench_result_free(&r);
    return rc;
}
