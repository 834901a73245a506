/*
 * progress.h -- a one-line progress indicator on stderr for long CLI runs
 * (bench, report, train): what is running, how far it is, and an estimate
 * of the time left, rewritten in place with '\r'.
 *
 * It is shown only when stderr is a terminal and the command's output is
 * not machine-readable (--json); otherwise every call is a no-op, so logs
 * and pipes never see it.
 */
#ifndef REMAT_CLI_PROGRESS_H
#define REMAT_CLI_PROGRESS_H

typedef struct cli_progress {
    int on;            /* 0: every call does nothing */
    double t0_ms;      /* when the timed work began */
    double last_ms;    /* last redraw (redraws are throttled to 10 per second) */
    int width;         /* characters of the line on screen, to blank it */
} cli_progress;

/* Turns the indicator on when `wanted` and stderr is a terminal. */
void cli_progress_init(cli_progress *p, int wanted);
/* 1 when stdout is a terminal too: then a command that prints a line per
 * step there (train) needs no progress line, and would garble it. */
int cli_progress_stdout_is_tty(void);
/* Restarts the clock used for the estimate (e.g. after warm-up). */
void cli_progress_restart(cli_progress *p);
/* Redraws "WHAT | 40% | about 12s left" (done of total units of work).
 * The estimate assumes the remaining units take as long as the ones since
 * the last restart. */
void cli_progress_update(cli_progress *p, const char *what, long done, long total);
/* Blanks the line so that normal output starts on a clean line (cli_error
 * does this by itself). */
void cli_progress_clear(cli_progress *p);

#endif
