/*
 * svg.c -- the tiny SVG writer (see svg.h).
 *
 * Nice ticks: the step is the smallest of {1, 2, 5} x 10^k that gives at
 * most `target` intervals (Heckbert, "Nice numbers for graph labels",
 * Graphics Gems, 1990), and the range is widened to whole steps.
 */
#include <math.h>
#include <string.h>
#include "svg.h"

void svg_axis_nice(svg_axis *a, double lo, double hi, int target, double p0, double p1)
{
    if (!(hi > lo)) hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1.0);
    if (target < 2) target = 2;
    double raw = (hi - lo) / target;
    double mag = pow(10.0, floor(log10(raw)));
    double step = mag;
    static const double m[] = { 1, 2, 2.5, 5, 10 };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i] * mag >= raw) { step = m[i] * mag; break; }
    a->step = step;
    a->lo = floor(lo / step + 1e-9) * step;
    a->hi = ceil(hi / step - 1e-9) * step;
    if (a->hi <= a->lo) a->hi = a->lo + step;
    a->p0 = p0;
    a->p1 = p1;
}

double svg_map(const svg_axis *a, double v)
{
    return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

void svg_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') fputc(' ', f);  /* invalid in XML 1.0 */
            else fputc(*s, f);
        }
    }
}

void svg_begin(FILE *f, int w, int h, int xml_decl, const char *title)
{
    if (xml_decl) fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" role=\"img\">\n", w, h, w, h);
    fputs("<title>", f);
    svg_escape(f, title);
    fputs("</title>\n", f);
    svg_rect(f, 0, 0, w, h, "#ffffff", NULL);
}

void svg_end(FILE *f) { fputs("</svg>\n", f); }

static void attrs_out(FILE *f, const char *attrs)
{
    if (attrs && *attrs) fprintf(f, " %s", attrs);
}

void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *attrs)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"", x, y, w, h, fill);
    attrs_out(f, attrs);
    fputs("/>\n", f);
}

void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width,
              const char *dash, const char *attrs)
{
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%g\"",
            x1, y1, x2, y2, stroke, width);
    if (dash) fprintf(f, " stroke-dasharray=\"%s\"", dash);
    attrs_out(f, attrs);
    fputs("/>\n", f);
}

void svg_circle(FILE *f, double cx, double cy, double r, const char *fill, const char *stroke, const char *attrs)
{
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\"", cx, cy, r, fill);
    if (stroke) fprintf(f, " stroke=\"%s\" stroke-width=\"1.5\"", stroke);
    attrs_out(f, attrs);
    fputs("/>\n", f);
}

void svg_text(FILE *f, double x, double y, const char *anchor, double size, double rotate,
              const char *attrs, const char *text)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\"", x, y, size, anchor);
    if (rotate != 0) fprintf(f, " transform=\"rotate(%g %.1f %.1f)\"", rotate, x, y);
    attrs_out(f, attrs);
    fputc('>', f);
    svg_escape(f, text);
    fputs("</text>\n", f);
}

void svg_fmt_tick(double v, double step, char *buf, size_t n)
{
    if (fabs(v) < step * 1e-6) v = 0;
    int dec = 0;
    for (double s = step; dec < 6 && fabs(s - round(s)) > 1e-9 * fmax(1, fabs(s)); s *= 10) dec++;
    if (fabs(v) >= 1e7) snprintf(buf, n, "%.3g", v);
    else snprintf(buf, n, "%.*f", dec, v);
}

double svg_text_width(const char *s, double size)
{
    return 0.58 * size * (double)strlen(s);
}

void svg_frame(FILE *f, const svg_axis *x, const svg_axis *y, const char *xtitle, const char *ytitle)
{
    double x0 = x->p0, x1 = x->p1, y0 = y->p0, y1 = y->p1;   /* y0 bottom, y1 top */
    char buf[64];
    fputs("<g class=\"grid\">\n", f);
    for (double v = x->lo; v <= x->hi + x->step * 1e-6; v += x->step)
        svg_line(f, svg_map(x, v), y0, svg_map(x, v), y1, "#e6e6e6", 1, NULL, NULL);
    for (double v = y->lo; v <= y->hi + y->step * 1e-6; v += y->step)
        svg_line(f, x0, svg_map(y, v), x1, svg_map(y, v), "#e6e6e6", 1, NULL, NULL);
    fputs("</g>\n<g class=\"axis x\">\n", f);
    svg_line(f, x0, y0, x1, y0, "#333333", 1.2, NULL, NULL);
    for (double v = x->lo; v <= x->hi + x->step * 1e-6; v += x->step) {
        double px = svg_map(x, v);
        svg_line(f, px, y0, px, y0 + 5, "#333333", 1, NULL, NULL);
        svg_fmt_tick(v, x->step, buf, sizeof buf);
        svg_text(f, px, y0 + 19, "middle", 12, 0, "class=\"tick\"", buf);
    }
    svg_text(f, (x0 + x1) / 2, y0 + 44, "middle", 14, 0, "class=\"axis-title\"", xtitle);
    fputs("</g>\n<g class=\"axis y\">\n", f);
    svg_line(f, x0, y0, x0, y1, "#333333", 1.2, NULL, NULL);
    for (double v = y->lo; v <= y->hi + y->step * 1e-6; v += y->step) {
        double py = svg_map(y, v);
        svg_line(f, x0 - 5, py, x0, py, "#333333", 1, NULL, NULL);
        svg_fmt_tick(v, y->step, buf, sizeof buf);
        svg_text(f, x0 - 8, py + 4, "end", 12, 0, "class=\"tick\"", buf);
    }
    svg_text(f, x0 - 56, (y0 + y1) / 2, "middle", 14, -90, "class=\"axis-title\"", ytitle);
    fputs("</g>\n", f);
}

void svg_plot_axes(svg_plot *p, double xhi, int xticks, double yhi, int yticks)
{
    svg_axis_nice(&p->x, 0, xhi, xticks, p->L, p->R);
    svg_axis_nice(&p->y, 0, yhi, yticks, p->B, p->T);
}

void svg_title(FILE *f, double x, double y, const char *text)
{
    svg_text(f, x, y, "start", 18, 0, "class=\"title\" font-weight=\"bold\"", text);
}

void svg_subtitle(FILE *f, double x, double y, const char *text)
{
    svg_text(f, x, y, "start", 12.5, 0, "class=\"subtitle\" fill=\"#555555\"", text);
}

void svg_diamond(FILE *f, double cx, double cy, const char *fill, const char *stroke)
{
    fprintf(f, "<path d=\"M%.1f %.1fl7 7l-7 7l-7 -7z\" fill=\"%s\" stroke=\"%s\"/>", cx, cy - 7, fill, stroke);
}

void svg_square(FILE *f, double cx, double cy, const char *fill, const char *stroke)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\" stroke=\"%s\"/>", cx - 5, cy - 5,
            fill, stroke);
}

void svg_legend_begin(svg_legend *lg, FILE *f, double x, double y, double text_dx, double size, const char *title)
{
    lg->f = f;
    lg->x = x;
    lg->y = y;
    lg->text_dx = text_dx;
    lg->size = size;
    fputs("<g class=\"legend\">\n", f);
    svg_text(f, x, y, "start", 13, 0, "font-weight=\"bold\"", title);
}

void svg_legend_heading(svg_legend *lg, double gap, const char *title)
{
    lg->y += gap;
    svg_text(lg->f, lg->x, lg->y, "start", 13, 0, "font-weight=\"bold\"", title);
}

double svg_legend_next(svg_legend *lg, double gap)
{
    return lg->y += gap;
}

void svg_legend_label(const svg_legend *lg, const char *text)
{
    svg_text(lg->f, lg->x + lg->text_dx, lg->y, "start", lg->size, 0, NULL, text);
}

void svg_legend_end(const svg_legend *lg) { fputs("</g>\n", lg->f); }
