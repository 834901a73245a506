/*
 * svg.h -- a tiny SVG writer for remat's plots: shapes, escaped text,
 * linear axes with "nice" ticks (1, 2, 5 x 10^k), a plot frame with grid,
 * tick labels and axis titles, titles, markers and legends.
 *
 * Everything is written with fprintf to a FILE (a file, or a memory stream
 * for inline SVG in an HTML page).  Coordinates are SVG user units (pixels
 * at 100% zoom), y growing downwards as in SVG.
 */
#ifndef REMAT_CLI_SVG_H
#define REMAT_CLI_SVG_H

#include <stdio.h>

/* A linear map from data [lo, hi] to pixels [p0, p1]. */
typedef struct svg_axis {
    double lo, hi;       /* data range */
    double p0, p1;       /* pixel range (p1 < p0 for a y axis) */
    double step;         /* tick spacing chosen by svg_axis_nice */
} svg_axis;

/* Widens [lo, hi] to multiples of a nice step so that about `target`
 * ticks fit, and sets the pixel range. */
void svg_axis_nice(svg_axis *a, double lo, double hi, int target, double p0, double p1);
double svg_map(const svg_axis *a, double v);

/* <svg> with width, height and viewBox; `xml_decl` adds the XML
 * declaration (for standalone files; omit it when inlining in HTML). */
void svg_begin(FILE *f, int w, int h, int xml_decl, const char *title);
void svg_end(FILE *f);
/* Writes s with &, <, >, " and ' escaped (safe in text and attributes). */
void svg_escape(FILE *f, const char *s);

/* `attrs` is extra raw attribute text (class, style, data-*), or NULL. */
void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *attrs);
void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width,
              const char *dash, const char *attrs);
void svg_circle(FILE *f, double cx, double cy, double r, const char *fill, const char *stroke,
                const char *attrs);
/* anchor: "start", "middle" or "end"; rotate: degrees about (x, y). */
void svg_text(FILE *f, double x, double y, const char *anchor, double size, double rotate,
              const char *attrs, const char *text);

/* A plot's area (pixels: left, right, top, bottom) and its two axes. */
typedef struct svg_plot {
    double L, R, T, B;
    svg_axis x, y;
} svg_plot;
/* Both axes from 0: x to xhi over [L, R] with about xticks ticks, y to yhi
 * over [B, T] (upwards) with about yticks (svg_axis_nice). */
void svg_plot_axes(svg_plot *p, double xhi, int xticks, double yhi, int yticks);
/* A plot's title (bold, 18 px) and a subtitle line (12.5 px, grey), their
 * baselines at y. */
void svg_title(FILE *f, double x, double y, const char *text);
void svg_subtitle(FILE *f, double x, double y, const char *text);

/* Markers centred on (cx, cy), 14 and 10 px across (no newline after). */
void svg_diamond(FILE *f, double cx, double cy, const char *fill, const char *stroke);
void svg_square(FILE *f, double cx, double cy, const char *fill, const char *stroke);

/* A legend: a column of entries under a bold heading, in <g class="legend">.
 * Each entry goes gap pixels below the previous line (svg_legend_next gives
 * its baseline, for the caller's marker at x); its label starts text_dx
 * right of x, size px high. */
typedef struct svg_legend {
    FILE *f;
    double x, y;          /* the last line's baseline */
    double text_dx, size;
} svg_legend;
void svg_legend_begin(svg_legend *lg, FILE *f, double x, double y, double text_dx, double size, const char *title);
/* another heading, gap below the last line */
void svg_legend_heading(svg_legend *lg, double gap, const char *title);
double svg_legend_next(svg_legend *lg, double gap);
void svg_legend_label(const svg_legend *lg, const char *text);
void svg_legend_end(const svg_legend *lg);

/* Grid, axis lines, ticks, tick labels and axis titles of a plot whose
 * area is the rectangle spanned by the two axes' pixel ranges.  The groups
 * carry class="axis x" and class="axis y". */
void svg_frame(FILE *f, const svg_axis *x, const svg_axis *y, const char *xtitle, const char *ytitle);

/* A tick value as short text ("0", "2.5", "1200", "1e+06"). */
void svg_fmt_tick(double v, double step, char *buf, size_t n);
/* Rough width in pixels of text in the default sans-serif font. */
double svg_text_width(const char *s, double size);

#endif
