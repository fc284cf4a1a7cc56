/* value_fmt.c — printing values: the reference's text notation and JSON
 * (DESIGN.md §5). Uses only the interface in value.h.
 *
 * Numbers print with at most 10 significant digits. The digits are those of
 * the shortest decimal that reads back as the same double, rounded half-up to
 * 10 places: 0.1+0.2 prints "0.3" and 191.48203125 prints "191.4820313", as a
 * person rounding the decimal they typed would expect.
 *
 * Integers, integral numbers, strings and positions are appended without
 * printf (issue 14: report lines of offenders were a third of pcheck's
 * time); the text is the same as "%lld", "%03o", "%04x" gave, which
 * tests/unit/test_report_fmt.c checks against the printf formatter. Numbers
 * that are not integral still go through snprintf ("%.*e" and "%.17g").
 */
#include "value.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmon/jsonstr.h"

#define SIG_DIGITS 10

/* Replace a locale's decimal comma, so output never depends on setlocale. */
static void fix_decimal_point(char *s)
{
    for (; *s; s++)
        if (*s == ',')
            *s = '.';
}

/* The significant digits of |x| (x finite, non-zero) rounded to SIG_DIGITS,
 * trailing zeros dropped, into d (no NUL); *exp10 gets the decimal exponent of
 * the first digit. Returns the number of digits (>= 1). */
static int sig_digits(double x, char d[24], int *exp10)
{
    char buf[48];
    x = fabs(x);
    /* For normal doubles a 10-digit decimal that reads back as x is already
     * the rounded shortest form; subnormals have fewer digits of precision. */
    int prec = x < DBL_MIN ? 0 : SIG_DIGITS - 1;
    for (;; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec, x);
        fix_decimal_point(buf);
        if (prec >= DBL_DECIMAL_DIG - 1 || strtod(buf, NULL) == x)
            break;
    }
    int nd = 0;
    const char *p = buf;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            d[nd++] = *p;
    int e = *p ? atoi(p + 1) : 0;
    if (nd > SIG_DIGITS) {
        bool up = d[SIG_DIGITS] >= '5';
        nd = SIG_DIGITS;
        int i = nd - 1;
        for (; up && i >= 0 && d[i] == '9'; i--)
            d[i] = '0';
        if (up && i >= 0) {
            d[i]++;
        } else if (up) {        /* 9.99...95 became 10.00...0 */
            d[0] = '1';
            e++;
        }
    }
    while (nd > 1 && d[nd - 1] == '0')
        nd--;
    *exp10 = e;
    return nd;
}

void pv_format_number(ps_buf *out, double x)
{
    if (!isfinite(x)) {
        ps_buf_puts(out, "UNDEFINED");
        return;
    }
    if (x == 0) {               /* also -0 */
        ps_buf_putc(out, '0');
        return;
    }
    if (x == trunc(x) && fabs(x) < 1e9) {
        ps_buf_put_i64(out, (int64_t)x);
        return;
    }
    char d[24];
    int e;
    int nd = sig_digits(x, d, &e);
    if (x < 0)
        ps_buf_putc(out, '-');
    if (e < -4 || e >= 9) {             /* 3.641230271e9, 1.5e-7 */
        ps_buf_putc(out, d[0]);
        if (nd > 1) {
            ps_buf_putc(out, '.');
            ps_buf_put(out, d + 1, (size_t)nd - 1);
        }
        ps_buf_putc(out, 'e');
        ps_buf_put_i64(out, e);
    } else if (e >= 0) {                /* 191.4820313, 100000 */
        for (int i = 0; i <= e; i++)
            ps_buf_putc(out, i < nd ? d[i] : '0');
        if (nd > e + 1) {
            ps_buf_putc(out, '.');
            ps_buf_put(out, d + e + 1, (size_t)(nd - e - 1));
        }
    } else {                            /* 0.04 */
        ps_buf_puts(out, "0.");
        for (int i = -1; i > e; i--)
            ps_buf_putc(out, '0');
        ps_buf_put(out, d, (size_t)nd);
    }
}

/* Does byte c stand for itself between quotes (text and JSON alike)? */
static inline bool plain_byte(unsigned char c)
{
    return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
}

/* Appends the run of plain bytes at p; returns the first byte after it. */
static const unsigned char *plain_run(ps_buf *out, const unsigned char *p)
{
    const unsigned char *q = p;
    while (plain_byte(*q))
        q++;
    if (q > p)
        ps_buf_put(out, (const char *)p, (size_t)(q - p));
    return q;
}

/* A string in the spec's literal syntax (A.10): \n \t \r \f \\ \" and \ooo. */
static void quoted_string(ps_buf *out, const char *s)
{
    ps_buf_putc(out, '"');
    for (const unsigned char *p = (const unsigned char *)s;; p++) {
        p = plain_run(out, p);
        if (!*p)
            break;
        switch (*p) {
        case '\n': ps_buf_puts(out, "\\n"); break;
        case '\t': ps_buf_puts(out, "\\t"); break;
        case '\r': ps_buf_puts(out, "\\r"); break;
        case '\f': ps_buf_puts(out, "\\f"); break;
        case '\\': ps_buf_puts(out, "\\\\"); break;
        case '"': ps_buf_puts(out, "\\\""); break;
        default:
            if (*p < 0x20 || *p > 0x7e) {       /* "\\%03o" */
                char o[4] = {'\\', (char)('0' + (*p >> 6)), (char)('0' + ((*p >> 3) & 7)),
                             (char)('0' + (*p & 7))};
                ps_buf_put(out, o, 4);
            } else {
                ps_buf_putc(out, (char)*p);
            }
        }
    }
    ps_buf_putc(out, '"');
}

static void format_value(ps_buf *out, const pv *v, bool nested)
{
    switch (v->kind) {
    case PV_NUM: pv_format_number(out, v->num); break;
    case PV_BOOL: ps_buf_puts(out, v->b ? "true" : "false"); break;
    case PV_STR:
        if (nested)
            quoted_string(out, v->str ? v->str : "");
        else
            ps_buf_puts(out, v->str ? v->str : "");
        break;
    case PV_TRIPLE:
        ps_buf_putc(out, '[');
        pv_format_number(out, v->t.v);
        ps_buf_putc(out, ',');
        pv_format_number(out, v->t.p);
        ps_buf_putc(out, ',');
        pv_format_number(out, v->t.m);
        ps_buf_putc(out, ']');
        break;
    case PV_MAP: {
        double *keys;
        uint32_t n = pv_map_keys_sorted(v, &keys);
        ps_buf_putc(out, '(');
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                ps_buf_puts(out, ", ");
            pv_format_number(out, keys[i]);
            ps_buf_puts(out, " -> ");
            format_value(out, pv_map_lookup(v, keys[i]), true);
        }
        ps_buf_putc(out, ')');
        free(keys);
        break;
    }
    case PV_EVENT:             /* <TYPE POS.SUB> */
        ps_buf_putc(out, '<');
        ps_buf_puts(out, pv_type_name(v->ev->type));
        ps_buf_putc(out, ' ');
        pv_format_pos(out, v->ev);
        ps_buf_putc(out, '>');
        break;
    case PV_INTERVAL:          /* <TYPE #UID> */
        ps_buf_putc(out, '<');
        ps_buf_puts(out, pv_type_name(v->iv->type));
        ps_buf_puts(out, " #");
        ps_buf_put_u64(out, v->iv->uid);
        ps_buf_putc(out, '>');
        break;
    default: ps_buf_puts(out, "UNDEFINED"); break;
    }
}

void pv_format_pos(ps_buf *out, const pv_event *e)
{
    ps_buf_put_u64(out, e->pos);
    ps_buf_putc(out, '.');
    ps_buf_put_u64(out, e->sub);
}

void pv_format(ps_buf *out, const pv *v)
{
    format_value(out, v, false);
}

/* ---- JSON ------------------------------------------------------------------------ */

/* Integral doubles below 2^53 exactly, other finite numbers with %.17g
 * (round-trips), non-finite ones as null. */
static void json_number(ps_buf *out, double x)
{
    char buf[40];
    if (!isfinite(x)) {
        ps_buf_puts(out, "null");
        return;
    }
    if (x == trunc(x) && fabs(x) < 9007199254740992.0) {
        ps_buf_put_i64(out, (int64_t)x);
        return;
    }
    snprintf(buf, sizeof(buf), "%.17g", x);
    fix_decimal_point(buf);
    ps_buf_puts(out, buf);
}

static void put_buf(void *ctx, const char *p, size_t n)
{
    ps_buf_put(ctx, p, n);
}

/* The suite's one JSON string writer (cmon/jsonstr.h): well-formed UTF-8
 * as it is, any other byte >= 0x80 (say from an octal escape in the spec)
 * as the Latin-1 code point \u00XX, so the output is valid JSON whatever
 * the string holds. */
void pv_json_string(ps_buf *out, const char *s)
{
    cmon_json_string(s, put_buf, out);
}

void pv_format_json(ps_buf *out, const pv *v)
{
    switch (v->kind) {
    case PV_NUM: json_number(out, v->num); break;
    case PV_BOOL: ps_buf_puts(out, v->b ? "true" : "false"); break;
    case PV_STR: pv_json_string(out, v->str); break;
    case PV_TRIPLE:
        ps_buf_putc(out, '[');
        json_number(out, v->t.v);
        ps_buf_putc(out, ',');
        json_number(out, v->t.p);
        ps_buf_putc(out, ',');
        json_number(out, v->t.m);
        ps_buf_putc(out, ']');
        break;
    case PV_MAP: {
        /* Keys are written exactly (not rounded to 10 digits), so distinct
         * keys always give distinct object members. */
        double *keys;
        uint32_t n = pv_map_keys_sorted(v, &keys);
        ps_buf_putc(out, '{');
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                ps_buf_putc(out, ',');
            ps_buf_putc(out, '"');
            json_number(out, keys[i]);
            ps_buf_puts(out, "\":");
            pv_format_json(out, pv_map_lookup(v, keys[i]));
        }
        ps_buf_putc(out, '}');
        free(keys);
        break;
    }
    case PV_EVENT:
        ps_buf_puts(out, "{\"type\":");
        pv_json_string(out, pv_type_name(v->ev->type));
        ps_buf_puts(out, ",\"pos\":\"");
        pv_format_pos(out, v->ev);
        ps_buf_puts(out, "\",\"ts\":");
        if (v->ev->timed)
            ps_buf_put_i64(out, v->ev->ts);
        else
            ps_buf_puts(out, "null");
        ps_buf_putc(out, '}');
        break;
    case PV_INTERVAL:
        ps_buf_puts(out, "{\"type\":");
        pv_json_string(out, pv_type_name(v->iv->type));
        ps_buf_puts(out, ",\"uid\":");
        ps_buf_put_u64(out, v->iv->uid);
        ps_buf_putc(out, '}');
        break;
    default: ps_buf_puts(out, "null"); break;
    }
}
