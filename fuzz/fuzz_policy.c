/*
 * fuzz_policy.c -- recomputation policy strings (src/schedule/policy.c and
 * the compiler behind remat_schedule_create).  Byte 0 picks the number of
 * layers (1..12) and dropout; the rest is the policy.  An accepted policy
 * must compile to a schedule that validates and simulates, and its canonical
 * string must compile to the identical schedule.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"

/* remat_schedule_instr walks the whole schedule per call: compare the
 * simulations and a handful of instructions */
static void same(const remat_schedule *a, const remat_schedule *b)
{
    size_t n = remat_schedule_length(a);
    FUZZ_CHECK(n == remat_schedule_length(b), "canonical policy gives %zu instructions, not %zu",
               remat_schedule_length(b), n);
    remat_sim x, y;
    FUZZ_CHECK(!remat_schedule_simulate(a, &x) && !remat_schedule_simulate(b, &y), "simulate");
    FUZZ_CHECK(x.peak_bytes == y.peak_bytes && x.stored_bytes == y.stored_bytes && x.flops == y.flops &&
               x.recomputed_blocks == y.recomputed_blocks, "canonical policy simulates differently");
    for (size_t k = 0; k < 4 && n; k++) {
        size_t i = (n - 1) * k / 3;
        remat_instr_info p, q;
        FUZZ_CHECK(!remat_schedule_instr(a, i, &p) && !remat_schedule_instr(b, i, &q), "instr");
        FUZZ_CHECK(p.kind == q.kind && p.layer == q.layer && !strcmp(p.tensor, q.tensor) &&
                   p.live_bytes == q.live_bytes, "instruction %zu differs", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1 + data[0] % 12;
    c.n_embd = 8;
    c.n_head = 2;
    c.vocab = 16;
    c.seq = c.max_seq = 4;
    c.batch = 1;
    c.dropout = data[0] & 0x80 ? 0.1f : 0.0f;
    char *s = malloc(size);
    FUZZ_CHECK(s, "malloc");
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    remat_schedule *a = NULL, *b = NULL;
    remat_status st = remat_schedule_create(&c, s, &a);
    if (st) {
        FUZZ_CHECK(!a && *remat_errmsg(), "a refused policy leaves no schedule and says why");
        FUZZ_CHECK(st == REMAT_ERR_POLICY || st == REMAT_ERR_NOMEM, "status %d for '%s'", (int)st, s);
    } else {
        remat_sim sim;
        FUZZ_CHECK(remat_schedule_validate(a) == REMAT_OK, "accepted '%s' fails validation: %s", s, remat_errmsg());
        FUZZ_CHECK(remat_schedule_simulate(a, &sim) == REMAT_OK, "simulate");
        FUZZ_CHECK(sim.peak_bytes >= sim.stored_bytes, "peak below stored");
        const char *canon = remat_schedule_policy(a);
        FUZZ_CHECK(remat_schedule_create(&c, canon, &b) == REMAT_OK, "canonical '%s' of '%s' refused: %s", canon, s,
                   remat_errmsg());
        FUZZ_CHECK(!strcmp(remat_schedule_policy(b), canon), "canonical string is not a fixed point");
        same(a, b);
    }
    remat_schedule_free(a);
    remat_schedule_free(b);
    free(s);
    return 0;
}
