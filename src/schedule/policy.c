/*
 * policy.c -- the policy grammar (README, "Recomputation policies"; the
 * plan tokens: README, "The planner"): parsing, validation and the
 * canonical string.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"
#include "../core/core.h"

#define POLICY_MAX_LEN (REMAT_POLICY_MAX - 1)

static int parse_int(const char *s, int lo, int hi, int *out)
{
    if (!*s || !isdigit((unsigned char)*s)) return 0;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* The name an offload: list gives the block input: its bit is the block
 * output's, which a block never offloads itself (the next block reads it). */
#define INPUT_NAME "input"

/* mask of per-block tensor names joined by '+' (term: "save" or "offload";
 * offload: lists may name the block input) */
static remat_status parse_names(const remat_table *tb, const char *term, const char *s, uint32_t *mask)
{
    int input = !strcmp(term, "offload");
    *mask = 0;
    char buf[64];
    while (*s) {
        size_t n = strcspn(s, "+");
        if (n == 0 || n >= sizeof buf)
            return remat_fail(REMAT_ERR_POLICY, "%s: expects names joined by '+', e.g. %s", term,
                              input ? "offload:4:qkv+input" : "save:qkv+fch");
        memcpy(buf, s, n);
        buf[n] = 0;
        int id = input && !strcmp(buf, INPUT_NAME) ? tb->nblock - 1 : remat_table_find(tb, buf);
        if (id < 0 || id >= tb->nblock || (input && id == tb->nblock - 1 && strcmp(buf, INPUT_NAME))) {
            char names[512];
            size_t k = 0;
            for (int t = 0; t < tb->nblock - input && k < sizeof names; t++)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", t ? " " : "", tb->defs[t].name);
            if (input && k < sizeof names) snprintf(names + k, sizeof names - k, " " INPUT_NAME);
            return remat_fail(REMAT_ERR_POLICY, "%s: '%s' is not a per-block tensor%s (%s)", term, buf,
                              input ? " that a block can offload" : "", names);
        }
        *mask |= 1u << id;
        s += n;
        if (*s == '+') {
            s++;
            if (!*s) return remat_fail(REMAT_ERR_POLICY, "%s: trailing '+'", term);
        }
    }
    return REMAT_OK;
}

void remat_policy_clear(remat_policy *p)
{
    if (!p) return;
    free(p->plan);
    memset(p, 0, sizeof *p);
}

remat_status remat_policy_parse(const remat_table *tb, const char *str, remat_policy *out)
{
    remat_status st = REMAT_OK;
    char *copy = NULL;
    memset(out, 0, sizeof *out);
    out->structure = RS_NONE;
    if (!str || !*str) str = "none";
    size_t len = strnlen(str, POLICY_MAX_LEN + 1);
    if (len > POLICY_MAX_LEN) return remat_fail(REMAT_ERR_POLICY, "policy string longer than %d bytes", POLICY_MAX_LEN);
    copy = remat_malloc(len + 1);
    if (!copy) return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing policy");
    memcpy(copy, str, len + 1);

    int have_structure = 0;
    char *save = NULL;
    for (char *term = strtok_r(copy, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
        int structural = 1;
        if (!strcmp(term, "none")) {
            out->structure = RS_NONE;
        } else if (!strcmp(term, "full")) {
            out->structure = RS_EVERY; out->arg = 1; out->is_full = 1;
        } else if (!strcmp(term, "sqrt")) {
            out->structure = RS_EVERY; out->arg = 0; out->is_sqrt = 1;
        } else if (!strncmp(term, "every:", 6)) {
            out->structure = RS_EVERY;
            if (!parse_int(term + 6, 1, 1 << 20, &out->arg)) {
                st = remat_fail(REMAT_ERR_POLICY, "every:K needs a whole number K >= 1, got '%s'", term); goto out;
            }
        } else if (!strncmp(term, "first:", 6)) {
            out->structure = RS_FIRST;
            if (!parse_int(term + 6, 0, 1 << 20, &out->arg)) {
                st = remat_fail(REMAT_ERR_POLICY, "first:N needs a whole number N >= 0, got '%s'", term); goto out;
            }
        } else if (!strncmp(term, "revolve:", 8)) {
            out->structure = RS_REVOLVE;
            if (!parse_int(term + 8, 1, 1 << 20, &out->arg)) {
                st = remat_fail(REMAT_ERR_POLICY, "revolve:S needs a whole number of slots S >= 2, got '%s'", term); goto out;
            }
        } else if (!strncmp(term, "plan:", 5)) {
            out->structure = RS_PLAN;
            const char *t = term + 5;
            if (!*t) { st = remat_fail(REMAT_ERR_POLICY, "plan: needs tokens"); goto out; }
            for (const char *c = t; *c; c++)
                if (!isalnum((unsigned char)*c) && *c != '.') {
                    st = remat_fail(REMAT_ERR_POLICY, "plan: unexpected character '%c'", *c); goto out;
                }
            free(out->plan);   /* a second plan: term (refused below) must not leak the first */
            out->plan = remat_strdup(t);
            if (!out->plan) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
        } else {
            structural = 0;
            if (!strcmp(term, "selective")) out->selective = 1;
            else if (!strcmp(term, "pointwise")) out->pointwise = 1;
            else if (!strncmp(term, "save:", 5)) {
                if ((st = parse_names(tb, "save", term + 5, &out->save_mask)) != REMAT_OK) goto out;
                if (!out->save_mask) { st = remat_fail(REMAT_ERR_POLICY, "save: needs at least one name"); goto out; }
            } else if (!strncmp(term, "offload:", 8)) {
                char num[16];
                const char *colon = strchr(term + 8, ':');
                size_t nl = colon ? (size_t)(colon - (term + 8)) : strlen(term + 8);
                if (nl >= sizeof num) nl = sizeof num - 1;
                memcpy(num, term + 8, nl);
                num[nl] = 0;
                if (!parse_int(num, 1, 1 << 20, &out->offload_n)) {
                    st = remat_fail(REMAT_ERR_POLICY, "offload:N needs a whole number of blocks N >= 1, got '%s'", term);
                    goto out;
                }
                out->offload_mask = UINT32_MAX;
                if (colon && (st = parse_names(tb, "offload", colon + 1, &out->offload_mask)) != REMAT_OK) goto out;
                if (!out->offload_mask) { st = remat_fail(REMAT_ERR_POLICY, "offload:N: needs at least one name"); goto out; }
            } else {
                st = remat_fail(REMAT_ERR_POLICY,
                                "unknown policy term '%s' (expected none, full, every:K, sqrt, first:N, "
                                "revolve:S, selective, pointwise, save:A+B, offload:N, plan:...)", term);
                goto out;
            }
        }
        if (structural) {
            if (have_structure) {
                st = remat_fail(REMAT_ERR_POLICY, "policy '%s' has two structure terms; combine one of "
                                "none/full/every/sqrt/first/revolve/plan with selective/pointwise/save", str);
                goto out;
            }
            have_structure = 1;
        }
    }
    if (str[0] == ',' || str[len - 1] == ',' || strstr(str, ",,")) {
        st = remat_fail(REMAT_ERR_POLICY, "policy '%s' has an empty term", str); goto out;
    }
    if (out->structure == RS_REVOLVE && out->arg < 2) {
        st = remat_fail(REMAT_ERR_POLICY, "revolve:S needs S >= 2 slots (the input and one more)"); goto out;
    }
    /* the keep-set: save: names (else all the framework saves), less what the modifiers
     * drop -- the table's RT_F_SELECTIVE / RT_F_POINTWISE entries -- and
     * always the block output */
    uint32_t keep = out->save_mask ? out->save_mask : remat_keep_default(tb);
    for (int t = 0; t < tb->nblock; t++)
        if ((out->selective && (tb->defs[t].flags & RT_F_SELECTIVE)) ||
            (out->pointwise && (tb->defs[t].flags & RT_F_POINTWISE)))
            keep &= ~(1u << t);
    out->keep = keep | remat_out_bit(tb);
out:
    free(copy);
    if (st != REMAT_OK) remat_policy_clear(out);
    return st;
}

char *remat_policy_string(const remat_table *tb, const remat_policy *p)
{
    size_t cap = 128 + 32 * RT_MAXT + (p->plan ? strlen(p->plan) : 0);   /* names are < 16 bytes, in two lists */
    char *s = remat_malloc(cap);
    if (!s) return NULL;
    size_t n = 0;
    s[0] = 0;
    switch (p->structure) {
    case RS_NONE: n += snprintf(s + n, cap - n, "none"); break;
    case RS_EVERY:
        if (p->is_full) n += snprintf(s + n, cap - n, "full");
        else if (p->is_sqrt) n += snprintf(s + n, cap - n, "sqrt");
        else n += snprintf(s + n, cap - n, "every:%d", p->arg);
        break;
    case RS_FIRST: n += snprintf(s + n, cap - n, "first:%d", p->arg); break;
    case RS_REVOLVE: n += snprintf(s + n, cap - n, "revolve:%d", p->arg); break;
    case RS_PLAN: n += snprintf(s + n, cap - n, "plan:%s", p->plan); break;
    }
    if (p->save_mask) {
        n += snprintf(s + n, cap - n, ",save:");
        int first = 1;
        for (int t = 0; t < tb->nblock; t++)
            if (p->save_mask & (1u << t)) {
                n += snprintf(s + n, cap - n, "%s%s", first ? "" : "+", tb->defs[t].name);
                first = 0;
            }
    }
    if (p->selective) n += snprintf(s + n, cap - n, ",selective");
    if (p->pointwise) n += snprintf(s + n, cap - n, ",pointwise");
    if (p->offload_n) {
        n += snprintf(s + n, cap - n, ",offload:%d", p->offload_n);
        if (p->offload_mask != UINT32_MAX) {
            int first = 1;
            for (int t = 0; t < tb->nblock; t++)
                if (p->offload_mask & (1u << t)) {
                    n += snprintf(s + n, cap - n, "%s%s", first ? ":" : "+", t == tb->nblock - 1 ? INPUT_NAME : tb->defs[t].name);
                    first = 0;
                }
        }
    }
    if (p->structure == RS_NONE && n > 5 && !strncmp(s, "none,", 5)) memmove(s, s + 5, strlen(s + 5) + 1);
    return s;
}
