/*
 * main.c -- `remat` entry point: dispatches to subcommands.
 * Each subcommand lives in its own cmd_*.c file and uses only remat.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

/* Idle OpenMP threads spin by default (libgomp: GOMP_SPINCOUNT 300000 with
 * OMP_WAIT_POLICY unset).  Beside a busy process on a small machine a
 * spinning thread holds a core the team's other thread needs, and a step
 * took 5-10x as long as with the threads sleeping (docs/performance.md,
 * "On a shared machine": passive beat every spin count tried).  libgomp
 * reads both variables once, before main, so when the user has set
 * neither, remat runs itself again with OMP_WAIT_POLICY=passive (the same
 * process: exec keeps the pid, the arguments and the rest of the
 * environment).  Set either variable to choose otherwise.  If the exec
 * fails, remat carries on spinning. */
static void passive_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1)) return;
    execv("/proc/self/exe", argv);
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", cmd_train, "train a GPT on the embedded task, a text file or llm.c shards"},
    {"schedule", cmd_schedule, "print the schedule a recomputation policy compiles to"},
    /* planner commands */
    {"plan", cmd_plan, "predict every policy's memory and time; the fastest plan for a budget"},
    {"profile", cmd_profile, "time every op on this machine and cache it for 'remat plan'"},
    /* bench and report commands */
    {"bench", cmd_bench, "run recomputation policies side by side: time, memory, GFLOP/s, plots"},
    {"report", cmd_report, "run a bench and write a self-contained HTML report"},
    /* checkpoint and weight commands */
    {"export", cmd_export, "write a training checkpoint's weights: llm.c, safetensors or a Hugging Face directory"},
};

static void usage(FILE *f)
{
    fprintf(f, "remat %s -- GPT-2 and Llama training with activation recomputation\n\n"
               "usage: remat <command> [flags]\n\ncommands:\n", remat_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'remat <command> --help' describes a command's flags.\n"
               "'remat --version' prints the version.\n");
}

int main(int argc, char **argv)
{
    passive_openmp(argv);
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) { printf("remat %s\n", remat_version()); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    return cli_error("unknown command '%s'; commands are listed by 'remat --help'", argv[1]) + 1;
}
