/*
 * cmd_schedule.c -- `remat schedule`: print the schedule a policy compiles
 * to, with the live activation bytes after each instruction (dry run).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

typedef struct schedule_opts {
    const char *policy;
    int json, summary;
} schedule_opts;

#define O(field) offsetof(schedule_opts, field)
static const cli_flag flags[] = {
    {"--recompute", "POLICY", CLI_FLAG_STRING, O(policy), 0, 0, NULL, NULL, "the policy to compile (default none)"},
    CLI_FLAG_JSON(schedule_opts, json,
                  "one JSON object: {\"policy\", \"peak_bytes\", \"stored_bytes\", ...,\n"
                  "\"instructions\": [{\"i\", \"op\", \"layer\", \"tensor\", \"live_bytes\",\n"
                  "\"peak_bytes\", \"flops\"}]}"),
    {"--summary", NULL, CLI_FLAG_SWITCH, O(summary), 0, 0, NULL, NULL, "only the totals"},
};
#undef O

int cmd_schedule(int argc, char **argv)
{
    remat_config c;
    schedule_opts o = { 0 };
    cli_config_start(&c);
    cli_flag_group groups[] = { cli_config_group(&c), { "schedule:", CLI_FLAGS(flags), &o } };
    cli_command cmd = {
        "schedule",
        "usage: remat schedule [--recompute POLICY] [config flags] [--json]\n\n"
        "Compiles POLICY (default none) for the config and prints every instruction\n"
        "with the activation bytes live after it, predicted by the dry-run simulator.\n"
        "Config defaults: the small model of 'remat train'.\n\n",
        NULL, groups, 2, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    const char *policy = o.policy;
    int json = o.json, summary = o.summary;
    cli_config_default_max_seq(&c);
    if (cli_config_check(&c)) return 2;
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create(&c, policy, &s);
    if (st) return cli_error("%s", remat_errmsg()) + (st == REMAT_ERR_POLICY || st == REMAT_ERR_INVALID);
    remat_sim sim;
    if ((st = remat_schedule_simulate(s, &sim))) {
        cli_error("cannot simulate the schedule: %s", remat_errmsg());
        remat_schedule_free(s);
        return 1;
    }
    size_t n = remat_schedule_length(s);
    char b1[32], b2[32], b3[32];
    int rc = 0;
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, 0);
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "policy", remat_schedule_policy(s));
        remat_jsonw_uint(w, "peak_bytes", sim.peak_bytes);
        remat_jsonw_uint(w, "stored_bytes", sim.stored_bytes);
        remat_jsonw_uint(w, "workset_bytes", sim.workset_bytes);
        remat_jsonw_uint(w, "peak_index", sim.peak_index);
        remat_jsonw_num(w, "flops", sim.flops);
        remat_jsonw_num(w, "recompute_flops", sim.recompute_flops);
        remat_jsonw_int(w, "max_checkpoints", sim.max_checkpoints);
        remat_jsonw_uint(w, "host_peak_bytes", sim.host_peak_bytes);
        remat_jsonw_uint(w, "transfer_bytes", sim.transfer_bytes);
        remat_jsonw_array(w, "instructions");
        for (size_t i = 0; i < n && !summary; i++) {
            remat_instr_info in;
            remat_schedule_instr(s, i, &in);
            remat_jsonw_object(w, NULL);
            remat_jsonw_uint(w, "i", i);
            remat_jsonw_str(w, "op", remat_instr_kind_name(in.kind));
            remat_jsonw_int(w, "layer", in.layer);
            remat_jsonw_str(w, "tensor", in.tensor);
            remat_jsonw_uint(w, "live_bytes", in.live_bytes);
            remat_jsonw_uint(w, "peak_bytes", in.peak_bytes);
            remat_jsonw_num(w, "flops", in.flops);
            remat_jsonw_uint(w, "host_bytes", in.host_bytes);
            remat_jsonw_end(w);
        }
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        rc = cli_json_close(w);
    } else {
        cli_config_print(stdout, &c);
        printf("policy: %s | %zu instructions\n", remat_schedule_policy(s), n);
        int host = sim.host_peak_bytes > 0;   /* a column for the host only when something goes there */
        if (!summary) {
            printf("%6s  %-9s %5s  %-9s %14s%s\n", "#", "op", "layer", "tensor", "live after", host ? "    host after" : "");
            for (size_t i = 0; i < n; i++) {
                remat_instr_info in;
                remat_schedule_instr(s, i, &in);
                char lay[16];
                if (in.layer < 0) snprintf(lay, sizeof lay, "-"); else snprintf(lay, sizeof lay, "%d", in.layer);
                char hb[40] = "";
                if (host) snprintf(hb, sizeof hb, " %13s", cli_fmt_bytes(in.host_bytes, b2, sizeof b2));
                printf("%6zu  %-9s %5s  %-9s %14s%s%s\n", i, remat_instr_kind_name(in.kind), lay, in.tensor,
                       cli_fmt_bytes(in.live_bytes, b1, sizeof b1), hb, i == sim.peak_index ? "   <- peak" : "");
            }
        }
        printf("peak %s (instruction %zu) | stored %s | working set %s | recompute %.1f%% of %.3g FLOPs | "
               "max checkpoints %d\n", cli_fmt_bytes(sim.peak_bytes, b1, sizeof b1), sim.peak_index,
               cli_fmt_bytes(sim.stored_bytes, b2, sizeof b2), cli_fmt_bytes(sim.workset_bytes, b3, sizeof b3),
               sim.flops > 0 ? 100 * sim.recompute_flops / sim.flops : 0.0, sim.flops, sim.max_checkpoints);
        if (host)
            printf("host: %s at most, %s over the link (offloaded and reloaded)\n",
                   cli_fmt_bytes(sim.host_peak_bytes, b1, sizeof b1), cli_fmt_bytes(sim.transfer_bytes, b2, sizeof b2));
    }
    remat_schedule_free(s);
    return rc;
}
