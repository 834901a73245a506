/*
 * plan_print.c -- the one printer of `remat plan` (a model, cmd_plan.c) and
 * `remat plan --table` (a chain of blocks a file describes, plan_table.c):
 * the rows of the policies asked for and of the optimal plan for a budget,
 * or the planner's Pareto front, as text or JSON; and each policy's layers
 * (cli_explain), which `plan --framework` prints too.  The commands give
 * only their own header (q->head) and their optimum (q->optimal); a table's
 * chain shows its kept bytes where a model shows working set and total
 * (cli.h, cli_plan_q).
 */
#include <stdlib.h>
#include <string.h>
#include "cli.h"

int cli_explain(FILE *f, const remat_config *c, const char *policy)
{
    size_t n = 0;
    if (remat_plan_explain(c, policy, NULL, 0, &n)) return cli_error("%s", remat_errmsg());
    char *text = malloc(n + 1);
    if (!text) return cli_error("out of memory");
    int rc = remat_plan_explain(c, policy, text, n + 1, NULL) ? cli_error("%s", remat_errmsg()) : (fputs(text, f), 0);
    free(text);
    return rc;
}

/* What a table's chain keeps for the backward when the forward ends, with
 * its checkpoint calls' bytes (*ckpt, may be NULL): remat_table_evaluate's,
 * as remat_torch.plan's (0 when it refuses the policy, which
 * remat_plan_evaluate priced). */
static uint64_t kept_of(const cli_plan_q *q, const remat_plan_row *r, uint64_t *ckpt)
{
    remat_table_row t;
    memset(&t, 0, sizeof t);
    int ok = remat_table_evaluate(q->c, q->prof, r->policy, &t) == REMAT_OK;
    uint64_t kept = ok ? t.kept_bytes : 0;
    if (ckpt) *ckpt = ok ? t.checkpoint_bytes : 0;
    remat_table_row_clear(&t);
    return kept;
}

static void row_json(remat_jsonw *w, const cli_plan_q *q, const remat_plan_row *r, const char *key)
{
    remat_jsonw_object(w, key);
    remat_jsonw_str(w, "policy", r->policy);
    uint64_t ckpt = 0;
    if (q->table) remat_jsonw_uint(w, "kept_bytes", kept_of(q, r, &ckpt));
    if (q->table) remat_jsonw_uint(w, "checkpoint_bytes", ckpt);
    remat_jsonw_uint(w, "peak_bytes", r->peak_bytes);
    remat_jsonw_uint(w, "stored_bytes", r->stored_bytes);
    if (!q->table) remat_jsonw_uint(w, "workset_bytes", r->workset_bytes);
    remat_jsonw_num(w, "overhead_pct", r->overhead_pct);
    remat_jsonw_num(w, "step_ms_pred", r->step_ms_pred);
    remat_jsonw_bool(w, "fits", r->fits);
    remat_jsonw_end(w);
}

/* The columns of a row: a model's peak, stored, working set and total (on
 * the front: peak and total); a table's kept and peak.  label NULL: none;
 * last: the row's last column (fits, or the plan on the front). */
static void row_text(const cli_plan_q *q, const char *label, const remat_plan_row *r, int front, const char *last)
{
    char b[4][32];
    if (label) printf("%-22.22s ", label);
    if (q->table)
        printf("%11s %11s", cli_fmt_bytes(kept_of(q, r, NULL), b[0], 32), cli_fmt_bytes(r->peak_bytes, b[1], 32));
    else if (front)
        printf("%11s %11s", cli_fmt_bytes(r->peak_bytes, b[0], 32), cli_fmt_bytes(r->total_bytes, b[1], 32));
    else
        printf("%11s %11s %11s %11s", cli_fmt_bytes(r->peak_bytes, b[0], 32), cli_fmt_bytes(r->stored_bytes, b[1], 32),
               cli_fmt_bytes(r->workset_bytes, b[2], 32), cli_fmt_bytes(r->total_bytes, b[3], 32));
    printf(" %9.1f%% %11.*f  %s\n", r->overhead_pct, q->table ? 3 : 2, r->step_ms_pred, last);
}

/* the heading of row_text's columns */
static void row_head(const cli_plan_q *q, const char *label, int front, const char *last)
{
    if (label) printf("%-22s ", label);
    if (q->table) printf("%11s %11s", "kept", "act. peak");
    else if (front) printf("%11s %11s", "act. peak", "total");
    else printf("%11s %11s %11s %11s", "act. peak", "stored", "working set", "total");
    printf(" %10s %11s  %s\n", "overhead", "step ms", last);
}

int cli_plan_budget(const cli_plan_q *q, int json, int explain)
{
    int nn = q->nn, rc = 0;
    remat_plan_row *rows = calloc(nn ? (size_t)nn : 1, sizeof *rows), *opt = calloc(1, sizeof *opt);
    int *ok = calloc(nn ? (size_t)nn : 1, sizeof *ok);
    if (!rows || !opt || !ok) { free(rows); free(opt); free(ok); return cli_error("out of memory"); }
    for (int i = 0; i < nn; i++) {
        ok[i] = remat_plan_evaluate(q->c, q->prof, q->names[i], q->budget, q->act, &rows[i]) == REMAT_OK;
        if (!ok[i] && q->given) { rc = cli_error("--recompute %s: %s", q->names[i], remat_errmsg()) + 1; goto out; }
        if (q->adjust) q->adjust(q, &rows[i]);
    }
    char err[600];
    remat_status st = q->optimal(q, opt, err, sizeof err);
    if (!st && q->adjust) q->adjust(q, opt);
    if (st && st != REMAT_ERR_BUDGET) { rc = cli_error("%s", err); goto out; }
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        q->head(q, w, 0);
        remat_jsonw_array(w, "rows");
        for (int i = 0; i < nn; i++)
            if (ok[i]) row_json(w, q, &rows[i], NULL);
        remat_jsonw_end(w);
        if (st) remat_jsonw_null(w, "optimal");
        else if (q->table) row_json(w, q, opt, "optimal");
        else {
            remat_jsonw_object(w, "optimal");
            remat_jsonw_str(w, "policy", opt->policy);
            remat_jsonw_uint(w, "peak_bytes", opt->peak_bytes);
            remat_jsonw_num(w, "step_ms_pred", opt->step_ms_pred);
            remat_jsonw_end(w);
        }
        remat_jsonw_end(w);
        if (cli_json_close(w)) { rc = 1; goto out; }
    } else {
        q->head(q, NULL, 0);
        printf("\n\n");
        row_head(q, "policy", 0, "fits");
        for (int i = 0; i < nn; i++)
            if (ok[i]) row_text(q, q->names[i], &rows[i], 0, rows[i].fits ? "yes" : "no");
        if (!st) {
            row_text(q, "optimal (plan below)", opt, 0, opt->fits ? "yes" : "no");
            printf("\noptimal plan: %s\n", opt->policy);
            cli_explain(stdout, q->c, opt->policy);
        }
        for (int i = 0; explain && i < nn; i++)
            if (ok[i]) {
                printf("\n%s:\n", q->names[i]);
                cli_explain(stdout, q->c, q->names[i]);
            }
    }
    if (st) rc = cli_error("%s", err);
out:
    remat_plan_rows_free(rows, (size_t)nn);
    remat_plan_rows_free(opt, 1);
    free(ok);
    return rc;
}

int cli_plan_pareto(const cli_plan_q *q, int json, int csv)
{
    remat_plan_row *rows = NULL;
    size_t n = 0;
    if (remat_plan_pareto(q->c, q->prof, &rows, &n)) return cli_error("%s", remat_errmsg());
    int rc = 0;
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_array(w, "rows");
        for (size_t i = 0; i < n; i++) row_json(w, q, &rows[i], NULL);
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        rc = cli_json_close(w);
    } else if (csv) {
        printf("peak_bytes,stored_bytes,workset_bytes,total_bytes,overhead_pct,step_ms_pred,policy\n");
        for (size_t i = 0; i < n; i++)
            printf("%llu,%llu,%llu,%llu,%.4f,%.4f,%s\n", (unsigned long long)rows[i].peak_bytes,
                   (unsigned long long)rows[i].stored_bytes, (unsigned long long)rows[i].workset_bytes,
                   (unsigned long long)rows[i].total_bytes, rows[i].overhead_pct, rows[i].step_ms_pred, rows[i].policy);
    } else {
        /* a table's front keeps the budget rows' label column, empty */
        const char *label = q->table ? "" : NULL;
        q->head(q, NULL, 1);
        printf("Pareto front: %zu plans, activation peak against predicted step time\n\n", n);
        row_head(q, label, 1, "plan");
        for (size_t i = 0; i < n; i++) row_text(q, label, &rows[i], 1, rows[i].policy);
    }
    remat_plan_rows_free(rows, n);
    return rc;
}
