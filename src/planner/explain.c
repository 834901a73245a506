/*
 * explain.c -- plans a person can read: what a policy does with each layer,
 * as ranges of layers that are treated alike ("layers 0-61: keep all but
 * att ...; recompute att ... in the backward"), from the compiled schedule
 * (remat_schedule_layers).  `remat plan --explain` prints it, and so does
 * remat_torch's Plan.explain(): one text, remat_plan_explain.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"

/* the text so far: malloc'd, grown as lines come; ok 0 once out of memory */
typedef struct text { char *s; size_t len, cap; int ok; } text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    if (!t->ok) return;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) { t->ok = 0; return; }
    if (t->len + (size_t)k + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + (size_t)k + 1) cap *= 2;
        char *p = remat_realloc(t->s, cap);
        if (!p) { t->ok = 0; return; }
        t->s = p;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)k;
}

/* names of the tensors in mask that exist (have bytes) under c, joined by ", " */
static void names(const remat_config *c, uint32_t mask, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int t = 0; t < 32 && k < n; t++) {
        remat_tensor_info ti;
        if (!(mask & (1u << t)) || remat_tensor_get(c, t, &ti) || !ti.bytes) continue;
        k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", ti.name);
    }
}

/* per-block tensors (as a mask) that exist under c; *saved: those the
 * framework keeps by default; *out: the block output's bit */
static uint32_t block_tensors(const remat_config *c, uint32_t *saved, uint32_t *out)
{
    uint32_t all = 0;
    *saved = *out = 0;
    for (int t = 0; t < 32 && t < remat_config_tensor_count(c); t++) {
        remat_tensor_info ti;
        if (remat_tensor_get(c, t, &ti) || !ti.per_layer) break;
        if (!ti.bytes) continue;
        all |= 1u << t;
        if (!ti.transient) *saved |= 1u << t;
        *out = 1u << t;               /* the last per-block tensor */
    }
    return all;
}

/* one line for a layer range */
static void describe(text *f, const remat_config *c, int a, int b, int step, const remat_layer_info *li)
{
    uint32_t saved, outb, all = block_tensors(c, &saved, &outb);
    uint32_t kept = li->kept & ~outb & saved, inner = saved & ~outb;
    uint32_t keptx = li->kept & all & ~saved & ~outb;   /* transient tensors a save: list keeps */
    char buf[512], what[700];
    int own = (li->kept & outb) != 0;
    if (kept == inner) snprintf(what, sizeof what, "keep all");
    else if (!kept && !keptx) snprintf(what, sizeof what, own ? "keep only its output" : "keep nothing");
    else if (__builtin_popcount(inner & ~kept) <= __builtin_popcount(kept)) {
        names(c, inner & ~kept, buf, sizeof buf);
        snprintf(what, sizeof what, "keep all but %s", buf);
    } else {
        names(c, kept, buf, sizeof buf);
        snprintf(what, sizeof what, "keep only %s", buf);
    }
    size_t k = strlen(what);
    if (keptx) {
        names(c, keptx, buf, sizeof buf);
        k += (size_t)snprintf(what + k, sizeof what - k, " (and %s)", buf);
    }
    if (!own && (kept || keptx)) k += (size_t)snprintf(what + k, sizeof what - k, ", not its output");
    uint32_t host = li->offloaded & li->kept & all;
    if (host && host == (li->kept & all))
        k += (size_t)snprintf(what + k, sizeof what - k, ", all of it on the host (offloaded after the forward)");
    else if (host && host == (li->kept & all & ~outb))
        k += (size_t)snprintf(what + k, sizeof what - k, ", all but its output on the host (offloaded after the forward)");
    else if (host) {
        names(c, host, buf, sizeof buf);
        k += (size_t)snprintf(what + k, sizeof what - k, ", %s on the host (offloaded after the forward)", buf);
    }
    uint32_t rec = li->recomputed & all;
    if (inner && (rec & inner) == inner)
        snprintf(what + k, sizeof what - k, "; recompute the whole layer in the backward");
    else if (rec) {
        names(c, rec, buf, sizeof buf);
        snprintf(what + k, sizeof what - k, "; recompute %s in the backward", buf);
    }
    char kb[32];
    if (a == b) add(f, "  layer  %d", a);
    else add(f, "  layers %d-%d", a, b);
    if (step > 1) add(f, " (and every %d after)", step);
    if (li->host_bytes) {
        char hb[32];
        add(f, ": %s (%s kept per layer on the device, %s on the host)\n", what,
            remat_fmt_bytes(li->kept_bytes, kb, sizeof kb), remat_fmt_bytes(li->host_bytes, hb, sizeof hb));
    } else {
        add(f, ": %s (%s kept per layer)\n", what, remat_fmt_bytes(li->kept_bytes, kb, sizeof kb));
    }
}

/* One line per checkpoint nested in a segment's re-run (remat_plan_tree): what the layer
 * lines above do not say, that a re-run checkpoints again. */
static remat_status nesting(text *f, const remat_config *c, const char *policy)
{
    size_t n = 0;
    remat_status st = remat_plan_tree(c, policy, NULL, 0, &n);
    if (st) return st;
    remat_plan_node *v = remat_malloc((n ? n : 1) * sizeof *v);
    if (!v) return remat_fail(REMAT_ERR_NOMEM, "out of memory explaining a plan");
    if ((st = remat_plan_tree(c, policy, v, n, NULL))) goto out;
    for (size_t i = 0; i < n; i++) {
        const remat_plan_node *x = &v[i];
        if (x->parent < 0 || (x->kind == REMAT_NODE_BLOCK && x->keep == REMAT_KEEP_ALL)) continue;
        const remat_plan_node *p = &v[x->parent];
        if (x->kind == REMAT_NODE_SEGMENT && x->end - x->first > 1)
            add(f, "  nested: layers %d-%d are one checkpoint again inside the re-run of layers %d-%d\n",
                x->first, x->end - 1, p->first, p->end - 1);
        else
            add(f, "  nested: layer %d is checkpointed again inside the re-run of layers %d-%d%s\n", x->first,
                p->first, p->end - 1, x->keep == REMAT_KEEP_OUTPUT || x->kind == REMAT_NODE_SEGMENT ? "" :
                " (keeping part of it)");
    }
out:
    free(v);
    return st;
}

/* "0-1, 3-4" (the blocks of kind k), into buf */
static void kind_ranges(const int *kind, int L, int k, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (int a = 0; a < L && w < n; a++) {
        if (kind[a] != k || (a && kind[a - 1] == k)) continue;
        int b = a;
        while (b + 1 < L && kind[b + 1] == k) b++;
        if (w > 60) { snprintf(buf + w, n - w, ", ..."); return; }
        w += (size_t)(b > a ? snprintf(buf + w, n - w, "%s%d-%d", w ? ", " : "", a, b)
                            : snprintf(buf + w, n - w, "%s%d", w ? ", " : "", a));
    }
}

/* A table read from a file whose blocks differ: what each kind of block
 * saves and outputs, and which blocks are of it, one line each; times as
 * their range over the kind's blocks. */
static void block_kinds(text *f, const remat_config *c)
{
    int nk = 0;
    const int *kind = c->framework == REMAT_FRAMEWORK_TABLE ? remat_table_custom_kinds(c->table, &nk) : NULL;
    if (!kind || nk < 2) return;
    const remat_table *tb = remat_table_of(c);
    int L = c->n_layer, out = tb->nblock - 1;
    if (remat_table_custom_chain_name(c->table, 0)) {     /* several chains, one after the other */
        add(f, "  chains:");
        for (int a = 0; a < L;) {
            int ch = remat_table_custom_chain_of(c->table, a), b = a;
            if (remat_table_custom_pinned(c->table, a)) {
                add(f, "%s block %d joins them (%s's head and result, %s's input: kept whole)", a ? "," : "", a,
                    remat_table_custom_chain_name(c->table, ch), remat_table_custom_chain_name(c->table, ch + 1));
                a++;
                continue;
            }
            while (b + 1 < L && !remat_table_custom_pinned(c->table, b + 1)) b++;
            add(f, "%s %s %s %d", a ? "," : "", remat_table_custom_chain_name(c->table, ch), b > a ? "blocks" : "block", a);
            if (b > a) add(f, "-%d", b);
            a = b + 1;
        }
        add(f, "\n");
    }
    add(f, "  blocks of %d kinds:\n", nk);
    for (int k = 0; k < nk; k++) {
        char rg[96], sb[32], cb[32], ob[32];
        uint64_t e = 0, ch = 0, y = 0;
        double t[4] = { 1e300, 0, 1e300, 0 };     /* forward min, max; backward min, max */
        int first = -1;
        for (int l = 0; l < L; l++) {
            if (kind[l] != k) continue;
            double fw = 0, bw = 0, ms;
            for (int q = 0; q < out; q++) fw += remat_table_custom_layer_ms(c->table, q, l, 0, &ms) ? ms : 0;
            remat_table_custom_layer_ms(c->table, out, l, 1, &bw);
            if (fw < t[0]) t[0] = fw;
            if (fw > t[1]) t[1] = fw;
            if (bw < t[2]) t[2] = bw;
            if (bw > t[3]) t[3] = bw;
            if (first < 0) first = l;
        }
        for (int q = 0; q < out; q++) *(q && tb->nblock == 3 ? &ch : &e) += remat_tensor_bytes_at(c, q, first);
        y = remat_tensor_bytes_at(c, out, first);
        kind_ranges(kind, L, k, rg, sizeof rg);
        add(f, "    block%s %s: saving %s", strchr(rg, ',') || strchr(rg, '-') ? "s" : "", rg,
            remat_fmt_bytes(e + ch, sb, sizeof sb));
        if (tb->nblock == 3) add(f, " (cheap %s)", remat_fmt_bytes(ch, cb, sizeof cb));
        add(f, ", output %s; forward %.4g", remat_fmt_bytes(y, ob, sizeof ob), t[0]);
        if (t[1] > t[0]) add(f, "-%.4g", t[1]);
        add(f, " ms, backward %.4g", t[2]);
        if (t[3] > t[2]) add(f, "-%.4g", t[3]);
        add(f, " ms\n");
    }
}

remat_status remat_plan_explain(const remat_config *c, const char *policy, char *buf, size_t n, size_t *len)
{
    remat_schedule *s = NULL;
    remat_layer_info *li = NULL;
    text f = { NULL, 0, 0, 1 };
    remat_status st;
    if (len) *len = 0;
    if (n && buf) buf[0] = 0;
    if (!c || (n && !buf)) return remat_fail(REMAT_ERR_INVALID, "remat_plan_explain: NULL argument");
    if ((st = remat_schedule_create(c, policy, &s))) return st;
    li = remat_calloc((size_t)c->n_layer, sizeof *li);
    if (!li || remat_schedule_layers(s, li)) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory explaining a plan"); goto out; }
    int L = c->n_layer, a = 0, p = 1, nr = 1;
    block_kinds(&f, c);
    /* alike: the same tensors kept, recomputed and offloaded, and as many
     * bytes (blocks of different kinds keep different bytes) */
#define SAME(i, j) (li[i].kept == li[j].kept && li[i].recomputed == li[j].recomputed && \
                    li[i].offloaded == li[j].offloaded && li[i].kept_bytes == li[j].kept_bytes && \
                    li[i].host_bytes == li[j].host_bytes)
    for (int l = 1; l < L; l++) nr += !SAME(l, l - 1);
    /* many ranges: the plan may repeat a pattern of p layers (every:K, revolve) */
    if (nr > 8)
        for (int q = 2; q <= 16 && q < L && p == 1; q++) {
            int rep = 1;
            for (int l = q; l < L && rep; l++) rep = SAME(l, l - q);
            if (rep) p = q;
        }
    if (p > 1) add(&f, "  a pattern of %d layers, repeated:\n", p);
    int end = p > 1 ? p : L;
    for (int l = 1; l <= end; l++)
        if (l == end || !SAME(l, a)) {
            describe(&f, c, a, l - 1, p, &li[a]);
            a = l;
        }
#undef SAME
    if ((st = nesting(&f, c, policy))) goto out;
    if (!f.ok) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory explaining a plan"); goto out; }
    if (len) *len = f.len;
    if (n) {
        size_t k = f.len < n - 1 ? f.len : n - 1;
        if (k) memcpy(buf, f.s, k);
        buf[k] = 0;
    }
out:
    remat_schedule_free(s);
    free(li);
    free(f.s);
    return st;
}
