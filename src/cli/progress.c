/*
 * progress.c -- the stderr progress line (see progress.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "progress.h"

/* The line on screen, if any, so that cli_error can blank it first. */
static cli_progress *active;

static void clear_active(void)
{
    if (active) cli_progress_clear(active);
}

void cli_progress_init(cli_progress *p, int wanted)
{
    memset(p, 0, sizeof *p);
    p->on = wanted && isatty(STDERR_FILENO);
    p->t0_ms = cli_now_ms();
}

int cli_progress_stdout_is_tty(void)
{
    return isatty(STDOUT_FILENO);
}

void cli_progress_restart(cli_progress *p)
{
    p->t0_ms = cli_now_ms();
}

static void fmt_left(double s, char *buf, size_t n)
{
    if (s < 0) snprintf(buf, n, "estimating time left");
    else if (s < 90) snprintf(buf, n, "about %.0fs left", s);
    else if (s < 5400) snprintf(buf, n, "about %.0f min left", s / 60);
    else snprintf(buf, n, "about %.1f h left", s / 3600);
}

void cli_progress_update(cli_progress *p, const char *what, long done, long total)
{
    if (!p->on) return;
    double now = cli_now_ms();
    if (done > 0 && done < total && now - p->last_ms < 100) return;
    p->last_ms = now;
    char left[64], line[256];
    double el = (now - p->t0_ms) / 1000.0;
    fmt_left(done > 0 ? el / (double)done * (double)(total - done) : -1, left, sizeof left);
    int w = snprintf(line, sizeof line, "%s | %3.0f%% | %s", what, total > 0 ? 100.0 * (double)done / (double)total : 0.0,
                     left);
    if (w < 0) return;
    if (w >= (int)sizeof line) w = (int)sizeof line - 1;
    /* pad with blanks over a longer previous line */
    fprintf(stderr, "\r%s%*s", line, p->width > w ? p->width - w : 0, "");
    fflush(stderr);
    p->width = w;
    active = p;
    cli_error_hook = clear_active;
}

void cli_progress_clear(cli_progress *p)
{
    if (active == p) active = NULL;
    if (!p->on || !p->width) return;
    fprintf(stderr, "\r%*s\r", p->width, "");
    fflush(stderr);
    p->width = 0;
}
