/*
 * fuzz_table.c -- tables read from files (src/io/tablefile.c: the JSON that
 * remat plan --table and remat_table_read take).  A refused file says why
 * in one line with FORMAT (or NOMEM) and leaves nothing loaded; an accepted
 * one written back (remat_tabfile_dump) parses to the same dump (a fixed
 * point), loads as a config the checks accept, simulates with its stored
 * bytes plus outside_bytes equal to what its numbers keep under "none" and
 * "full" (each block's own numbers: version 2's blocks may differ), its
 * peak there the kept bytes plus reserve_bytes (several chains: with the
 * junctions between them kept whole), its device peak under "none" (version 3,
 * measured working sets) at least the static bytes with the kept bytes and
 * the head's working set, and with the optimizer step's, and unloads.
 */
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

static uint64_t stored(const remat_config *c, const char *policy, uint64_t *peak)
{
    remat_schedule *s = NULL;
    remat_sim sim;
    FUZZ_CHECK(remat_schedule_create(c, policy, &s) == REMAT_OK && remat_schedule_simulate(s, &sim) == REMAT_OK,
               "%s: %s", policy, remat_errmsg());
    remat_schedule_free(s);
    *peak = sim.peak_bytes;
    return sim.stored_bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_tabfile t;
    remat_status st = remat_tabfile_parse(data, size, "table", &t);
    if (st) {
        FUZZ_CHECK(*remat_errmsg() && !strchr(remat_errmsg(), '\n'), "a refusal says why in one line: '%s'",
                   remat_errmsg());
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        FUZZ_CHECK(!t.chain && !t.name, "a refused table holds nothing");
        remat_config c;
        FUZZ_CHECK(remat_table_read(data, size, &c, NULL) == st, "remat_table_read refuses it the same way");
        return 0;
    }
    char *d1 = NULL, *d2 = NULL;
    remat_tabfile u;
    FUZZ_CHECK(remat_tabfile_dump(&t, &d1) == REMAT_OK, "dump: %s", remat_errmsg());
    FUZZ_CHECK(remat_tabfile_parse(d1, strlen(d1), "dump", &u) == REMAT_OK, "reparse: %s", remat_errmsg());
    FUZZ_CHECK(remat_tabfile_dump(&u, &d2) == REMAT_OK && !strcmp(d1, d2), "the dump is a fixed point");
    remat_config c;
    remat_profile *p = NULL;
    remat_table_info info;
    FUZZ_CHECK(remat_table_read(data, size, &c, &p) == REMAT_OK && p, "read: %s", remat_errmsg());
    FUZZ_CHECK(remat_config_check(&c) == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK, "the config");
    /* what the numbers keep: every boundary, the saved tensors of every block kept whole, or none (a block's own
     * numbers: blocks may differ in version 2); with several chains also what the heads and inputs between them
     * keep and every result a later chain reads, whatever the plan */
    uint64_t e = 0, pk;
    int64_t base = 0;
    for (int k = 0; k < t.nchain; k++) {
        const remat_tabfile_chain *ch = &t.chain[k];
        const remat_tabfile_block *last = &ch->block[ch->nblock - 1];
        base += (int64_t)(ch->input_bytes + ch->input_saved + ch->head_saved) -
                (ch->input_kept ? 0 : (int64_t)ch->input_bytes) - (ch->head_keeps_input ? 0 : (int64_t)last->output_bytes);
        if (k + 1 < t.nchain) base += (int64_t)(ch->head_output ? ch->head_output : last->output_bytes);
        for (int l = 0; l < ch->nblock; l++) {
            base += (int64_t)ch->block[l].output_bytes;
            for (size_t q = 0; q < ch->block[l].nsaved; q++) e += ch->block[l].saved[q].bytes;
        }
    }
    uint64_t sn = stored(&c, "none", &pk);
    FUZZ_CHECK((int64_t)sn + info.outside_bytes == base + (int64_t)e, "none keeps");
    FUZZ_CHECK(pk == (uint64_t)((int64_t)sn + info.outside_bytes) + info.reserve_bytes, "none's peak");
    if (c.n_layer <= 64) {     /* every block checkpointed; the junction between two chains kept whole */
        char pol[512] = "plan:";
        for (int k = 0, l = 0; k < t.nchain; k++) {
            for (int i = 0; i < t.chain[k].nblock; i++, l++) strcat(pol, l ? ".A0" : "A0");
            if (k + 1 < t.nchain) { strcat(pol, t.selective ? ".A3" : ".A1"); l++; }
        }
        uint64_t sf = stored(&c, pol, &pk);
        FUZZ_CHECK((int64_t)sf + info.outside_bytes == base, "every block checkpointed keeps");
        FUZZ_CHECK(pk == (uint64_t)base + info.reserve_bytes, "every block checkpointed: its peak");
    }
    if (t.has_work) {      /* version 3's measured working sets: the head's moment and the optimizer's are the step's */
        remat_table_row r;
        FUZZ_CHECK(remat_table_evaluate(&c, p, "none", &r) == REMAT_OK, "none: %s", remat_errmsg());
        uint64_t dp = remat_table_row_device_peak(&r);
        FUZZ_CHECK(dp >= info.static_bytes + r.kept_bytes + t.chain[t.nchain - 1].head_work &&
                   dp >= info.static_bytes + t.optimizer_work, "none's device peak %llu", (unsigned long long)dp);
        remat_table_row_clear(&r);
    }
    remat_profile_free(p);
    remat_table_unload(&c);
    FUZZ_CHECK(remat_config_check(&c) != REMAT_OK, "unloaded");
    remat_tabfile_clear(&t);
    remat_tabfile_clear(&u);
    free(d1);
    free(d2);
    return 0;
}
