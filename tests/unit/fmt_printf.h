/* fmt_printf.h — the report and value formatters as they were before
 * issue 14 (commit 8ac185c: libpspec/src/value_fmt.c and report.c), printf
 * and all, with every function renamed old_*: the reference that
 * test_report_fmt.c compares the printf-free ones with. Included by that test
 * only; do not edit except to follow a deliberate change of the output. */
#ifndef TEST_FMT_PRINTF_H
#define TEST_FMT_PRINTF_H

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "report.h"
#include "util.h"
#include "value.h"

#define SIG_DIGITS 10

/* Replace a locale's decimal comma, so output never depends on setlocale. */
static void old_fix_decimal_point(char *s)
{
    for (; *s; s++)
        if (*s == ',')
            *s = '.';
}

/* The significant digits of |x| (x finite, non-zero) rounded to SIG_DIGITS,
 * trailing zeros dropped, into d (no NUL); *exp10 gets the decimal exponent of
 * the first digit. Returns the number of digits (>= 1). */
static int old_sig_digits(double x, char d[24], int *exp10)
{
    char buf[48];
    x = fabs(x);
    /* For normal doubles a 10-digit decimal that reads back as x is already
     * the rounded shortest form; subnormals have fewer digits of precision. */
    int prec = x < DBL_MIN ? 0 : SIG_DIGITS - 1;
    for (;; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec, x);
        old_fix_decimal_point(buf);
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

static void old_format_number(ps_buf *out, double x)
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
        ps_buf_printf(out, "%lld", (long long)x);
        return;
    }
    char d[24];
    int e;
    int nd = old_sig_digits(x, d, &e);
    if (x < 0)
        ps_buf_putc(out, '-');
    if (e < -4 || e >= 9) {             /* 3.641230271e9, 1.5e-7 */
        ps_buf_putc(out, d[0]);
        if (nd > 1) {
            ps_buf_putc(out, '.');
            ps_buf_put(out, d + 1, (size_t)nd - 1);
        }
        ps_buf_printf(out, "e%d", e);
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

/* A string in the spec's literal syntax (A.10): \n \t \r \f \\ \" and \ooo. */
static void old_quoted_string(ps_buf *out, const char *s)
{
    ps_buf_putc(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '\n': ps_buf_puts(out, "\\n"); break;
        case '\t': ps_buf_puts(out, "\\t"); break;
        case '\r': ps_buf_puts(out, "\\r"); break;
        case '\f': ps_buf_puts(out, "\\f"); break;
        case '\\': ps_buf_puts(out, "\\\\"); break;
        case '"': ps_buf_puts(out, "\\\""); break;
        default:
            if (*p < 0x20 || *p > 0x7e)
                ps_buf_printf(out, "\\%03o", *p);
            else
                ps_buf_putc(out, (char)*p);
        }
    }
    ps_buf_putc(out, '"');
}

static void old_format_value(ps_buf *out, const pv *v, bool nested)
{
    switch (v->kind) {
    case PV_NUM: old_format_number(out, v->num); break;
    case PV_BOOL: ps_buf_puts(out, v->b ? "true" : "false"); break;
    case PV_STR:
        if (nested)
            old_quoted_string(out, v->str ? v->str : "");
        else
            ps_buf_puts(out, v->str ? v->str : "");
        break;
    case PV_TRIPLE:
        ps_buf_putc(out, '[');
        old_format_number(out, v->t.v);
        ps_buf_putc(out, ',');
        old_format_number(out, v->t.p);
        ps_buf_putc(out, ',');
        old_format_number(out, v->t.m);
        ps_buf_putc(out, ']');
        break;
    case PV_MAP: {
        double *keys;
        uint32_t n = pv_map_keys_sorted(v, &keys);
        ps_buf_putc(out, '(');
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                ps_buf_puts(out, ", ");
            old_format_number(out, keys[i]);
            ps_buf_puts(out, " -> ");
            old_format_value(out, pv_map_lookup(v, keys[i]), true);
        }
        ps_buf_putc(out, ')');
        free(keys);
        break;
    }
    case PV_EVENT:
        ps_buf_printf(out, "<%s %" PRIu64 ".%" PRIu32 ">", pv_type_name(v->ev->type), v->ev->pos,
                      v->ev->sub);
        break;
    case PV_INTERVAL:
        ps_buf_printf(out, "<%s #%" PRIu64 ">", pv_type_name(v->iv->type), v->iv->uid);
        break;
    default: ps_buf_puts(out, "UNDEFINED"); break;
    }
}

static void old_format(ps_buf *out, const pv *v)
{
    old_format_value(out, v, false);
}

/* ---- JSON ------------------------------------------------------------------------ */

/* Integral doubles below 2^53 exactly, other finite numbers with %.17g
 * (round-trips), non-finite ones as null. */
static void old_json_number(ps_buf *out, double x)
{
    char buf[40];
    if (!isfinite(x)) {
        ps_buf_puts(out, "null");
        return;
    }
    if (x == trunc(x) && fabs(x) < 9007199254740992.0)
        snprintf(buf, sizeof(buf), "%lld", (long long)x);
    else
        snprintf(buf, sizeof(buf), "%.17g", x);
    old_fix_decimal_point(buf);
    ps_buf_puts(out, buf);
}

/* Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms,
 * no surrogates, at most U+10FFFF) starting at p, or 0. */
static size_t old_utf8_len(const unsigned char *p)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        if (p[0] == 0xe0)
            lo = 0xa0;
        else if (p[0] == 0xed)
            hi = 0x9f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        if (p[0] == 0xf0)
            lo = 0x90;
        else if (p[0] == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

static void old_json_string(ps_buf *out, const char *s)
{
    if (!s) {
        ps_buf_puts(out, "null");
        return;
    }
    ps_buf_putc(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': ps_buf_puts(out, "\\\""); break;
        case '\\': ps_buf_puts(out, "\\\\"); break;
        case '\b': ps_buf_puts(out, "\\b"); break;
        case '\f': ps_buf_puts(out, "\\f"); break;
        case '\n': ps_buf_puts(out, "\\n"); break;
        case '\r': ps_buf_puts(out, "\\r"); break;
        case '\t': ps_buf_puts(out, "\\t"); break;
        default: {
            /* Well-formed UTF-8 passes through; any other byte >= 0x7f (say
             * from an octal escape in the spec) is taken as a Latin-1 code
             * point, so the output is valid JSON whatever the string holds. */
            size_t n = *p >= 0x80 ? old_utf8_len(p) : 0;
            if (n > 0) {
                ps_buf_put(out, (const char *)p, n);
                p += n - 1;
            } else if (*p < 0x20 || *p >= 0x7f) {
                ps_buf_printf(out, "\\u%04x", *p);
            } else {
                ps_buf_putc(out, (char)*p);
            }
        }
        }
    }
    ps_buf_putc(out, '"');
}

static void old_format_json(ps_buf *out, const pv *v)
{
    switch (v->kind) {
    case PV_NUM: old_json_number(out, v->num); break;
    case PV_BOOL: ps_buf_puts(out, v->b ? "true" : "false"); break;
    case PV_STR: old_json_string(out, v->str); break;
    case PV_TRIPLE:
        ps_buf_putc(out, '[');
        old_json_number(out, v->t.v);
        ps_buf_putc(out, ',');
        old_json_number(out, v->t.p);
        ps_buf_putc(out, ',');
        old_json_number(out, v->t.m);
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
            old_json_number(out, keys[i]);
            ps_buf_puts(out, "\":");
            old_format_json(out, pv_map_lookup(v, keys[i]));
        }
        ps_buf_putc(out, '}');
        free(keys);
        break;
    }
    case PV_EVENT:
        ps_buf_puts(out, "{\"type\":");
        old_json_string(out, pv_type_name(v->ev->type));
        ps_buf_printf(out, ",\"pos\":\"%" PRIu64 ".%" PRIu32 "\",\"ts\":", v->ev->pos, v->ev->sub);
        if (v->ev->timed)
            ps_buf_printf(out, "%" PRId64, v->ev->ts);
        else
            ps_buf_puts(out, "null");
        ps_buf_putc(out, '}');
        break;
    case PV_INTERVAL:
        ps_buf_puts(out, "{\"type\":");
        old_json_string(out, pv_type_name(v->iv->type));
        ps_buf_printf(out, ",\"uid\":%" PRIu64 "}", v->iv->uid);
        break;
    default: ps_buf_puts(out, "null"); break;
    }
}

static const char *old_result_word(pspec_result r)
{
    return r == PSPEC_PASS ? "pass" : r == PSPEC_FAIL ? "fail"
         : r == PSPEC_INCONCLUSIVE ? "inconclusive" : "undefined";
}

static void old_pos_text(ps_buf *b, const pv_event *e)
{
    ps_buf_printf(b, "%" PRIu64 ".%u", e->pos, e->sub);
}

/* The fields of an element — attributes of an event, metrics of an interval —
 * as (name, value) pairs; unnamed attributes ('?') are skipped. */
static uint32_t old_nfields(const pv *elem)
{
    return elem->kind == PV_EVENT ? elem->ev->nattr : elem->iv->nmetric;
}

static bool old_field_at(const pv *elem, uint32_t i, const char **name, pv *value)
{
    if (elem->kind == PV_EVENT) {
        const pv_event *e = elem->ev;
        const ps_evtype *t = e->type;
        if (!t->attrs[i])
            return false;
        *name = t->attrs[i];
        *value = pv_attr_defined(e->attr[i]) ? pv_num(e->attr[i]) : pv_undef();
        return true;
    }
    const ps_ivtype *t = elem->iv->type;
    *name = t->metrics[i].name;
    *value = elem->iv->metric[i];       /* borrowed: only formatted */
    return true;
}

/* " name = value, name = value" */
static void old_fields_text(ps_buf *b, const pv *elem)
{
    bool first = true;
    for (uint32_t i = 0; i < old_nfields(elem); i++) {
        const char *name;
        pv v;
        if (!old_field_at(elem, i, &name, &v))
            continue;
        ps_buf_printf(b, "%s%s = ", first ? " " : ", ", name);
        first = false;
        old_format(b, &v);
    }
}

/* {"name":value,...} */
static void old_fields_json(ps_buf *b, const pv *elem)
{
    bool first = true;
    ps_buf_putc(b, '{');
    for (uint32_t i = 0; i < old_nfields(elem); i++) {
        const char *name;
        pv v;
        if (!old_field_at(elem, i, &name, &v))
            continue;
        if (!first)
            ps_buf_putc(b, ',');
        first = false;
        old_json_string(b, name);
        ps_buf_putc(b, ':');
        old_format_json(b, &v);
    }
    ps_buf_putc(b, '}');
}

/* "Read #17 start 12.0 ts 1000, end 14.0 ts 9200:" / "CacheHit 5.0 ts 1800 thread 7:" */
static void old_element_text(ps_buf *b, const pv *elem)
{
    if (elem->kind == PV_INTERVAL) {
        const pv_interval *iv = elem->iv;
        ps_buf_printf(b, "%s #%" PRIu64 " start ", pv_type_name(iv->type), iv->uid);
        old_pos_text(b, iv->start);
        ps_buf_printf(b, " ts %" PRId64 ", end ", iv->start->ts);
        old_pos_text(b, iv->end);
        ps_buf_printf(b, " ts %" PRId64 ":", iv->end->ts);
    } else {
        const pv_event *e = elem->ev;
        ps_buf_printf(b, "%s ", pv_type_name(e->type));
        old_pos_text(b, e);
        ps_buf_printf(b, " ts %" PRId64 " thread %" PRId64 ":", e->ts, e->thread);
    }
    old_fields_text(b, elem);
}

static void old_element_json(ps_buf *b, const pv *elem)
{
    if (elem->kind == PV_INTERVAL) {
        const pv_interval *iv = elem->iv;
        ps_buf_puts(b, "\"kind\":\"interval\",\"type\":");
        old_json_string(b, pv_type_name(iv->type));
        ps_buf_printf(b, ",\"uid\":%" PRIu64 ",\"start\":\"", iv->uid);
        old_pos_text(b, iv->start);
        ps_buf_puts(b, "\",\"end\":\"");
        old_pos_text(b, iv->end);
        ps_buf_printf(b, "\",\"start_ts\":%" PRId64 ",\"end_ts\":%" PRId64 ",\"metrics\":", iv->start->ts,
                      iv->end->ts);
    } else {
        const pv_event *e = elem->ev;
        ps_buf_puts(b, "\"kind\":\"event\",\"type\":");
        old_json_string(b, pv_type_name(e->type));
        ps_buf_puts(b, ",\"uid\":\"");
        old_pos_text(b, e);
        ps_buf_puts(b, "\",\"start\":\"");
        old_pos_text(b, e);
        ps_buf_puts(b, "\",\"end\":\"");
        old_pos_text(b, e);
        ps_buf_printf(b, "\",\"start_ts\":%" PRId64 ",\"end_ts\":%" PRId64 ",\"thread\":%" PRId64 ",\"metrics\":",
                      e->ts, e->ts, e->thread);
    }
    old_fields_json(b, elem);
    if (elem->kind == PV_INTERVAL) {    /* (f392462: the units of durations) */
        const ps_ivtype *t = elem->iv->type;
        const char *sep = ",\"units\":{";
        for (uint32_t i = 0; i < elem->iv->nmetric; i++) {
            if (!ps_metric_is_duration(t, t->metrics[i].expr))
                continue;
            ps_buf_puts(b, sep);
            sep = ",";
            old_json_string(b, t->metrics[i].name);
            ps_buf_puts(b, ":\"ns\"");
        }
        if (sep[0] == ',' && sep[1] == '\0')
            ps_buf_putc(b, '}');
    }
}

/* "FILE:LINE: " plus the label, for assertion-related lines. */
static void old_where_text(ps_buf *b, const pspec_report *r)
{
    ps_buf_printf(b, "%s:%u: ", pspec_report_file(r), pspec_report_line(r));
}


/* The head of an assertion's line; a report assertion says so ("report":true). */
static void old_assert_json_head(ps_buf *b, const pspec_report *r)
{
    ps_buf_puts(b, "{\"spec\":");
    old_json_string(b, pspec_report_file(r));
    ps_buf_puts(b, ",\"assert\":");
    if (r->stmt->label)
        old_json_string(b, r->stmt->label);
    else
        ps_buf_puts(b, "null");
    ps_buf_printf(b, ",\"line\":%u,\"result\":\"%s\"", r->stmt->loc.line, old_result_word(r->result));
    if (r->result == PSPEC_INCONCLUSIVE)
        ps_buf_printf(b, ",\"lost\":%" PRIu64, r->lost);
    if (pspec_report_is_stats(r))
        ps_buf_puts(b, ",\"report\":true");
}

static char *old_report_format(const pspec_report *r, pspec_format fmt)
{
    ps_buf b = {0};
    bool json = fmt == PSPEC_FORMAT_JSON;
    switch (r->kind) {
    case PSPEC_REPORT_ASSERT:
        if (json) {
            old_assert_json_head(&b, r);
            ps_buf_printf(&b, ",\"offenders\":%" PRIu64, r->offenders);
            if (r->false_part) {
                ps_buf_puts(&b, ",\"false_part\":");
                old_json_string(&b, r->false_part);
            }
            if (r->nwit) {
                ps_buf_puts(&b, ",\"witness\":{");
                for (uint32_t i = 0; i < r->nwit; i++) {
                    if (i)
                        ps_buf_putc(&b, ',');
                    old_json_string(&b, r->wit[i].name);
                    ps_buf_putc(&b, ':');
                    old_format_json(&b, &r->wit[i].value);
                }
                ps_buf_putc(&b, '}');
            }
            ps_buf_putc(&b, '}');
            break;
        }
        old_where_text(&b, r);
        ps_buf_puts(&b, "assertion ");
        if (r->stmt->label)
            ps_buf_printf(&b, "\"%s\" ", r->stmt->label);
        ps_buf_puts(&b, r->result == PSPEC_PASS ? "held" : r->result == PSPEC_FAIL ? "failed"
                        : r->result == PSPEC_INCONCLUSIVE ? "is inconclusive" : "is UNDEFINED");
        if (r->result == PSPEC_INCONCLUSIVE && r->offenders)
            ps_buf_printf(&b, " (%" PRIu64 " offender%s over lost records; %" PRIu64 " record%s lost)",
                          r->offenders, r->offenders == 1 ? "" : "s", r->lost, r->lost == 1 ? "" : "s");
        else if (r->result == PSPEC_INCONCLUSIVE)
            ps_buf_printf(&b, " (%" PRIu64 " record%s lost)", r->lost, r->lost == 1 ? "" : "s");
        else if (r->offenders)
            ps_buf_printf(&b, " (%" PRIu64 " offender%s)", r->offenders, r->offenders == 1 ? "" : "s");
        if (r->false_part)
            ps_buf_printf(&b, " at %s", r->false_part);
        for (uint32_t i = 0; i < r->nwit; i++) {
            ps_buf_puts(&b, i ? "; " : ": where ");
            ps_buf_printf(&b, "%s = ", r->wit[i].name);
            old_format(&b, &r->wit[i].value);
        }
        break;
    case PSPEC_REPORT_OFFENDER:
        if (json) {
            old_assert_json_head(&b, r);
            ps_buf_putc(&b, ',');
            old_element_json(&b, r->elem);
            ps_buf_putc(&b, '}');
            break;
        }
        old_where_text(&b, r);
        if (r->stmt->label)
            ps_buf_printf(&b, "\"%s\" ", r->stmt->label);
        ps_buf_puts(&b, r->result == PSPEC_FAIL ? "failed for "
                        : r->result == PSPEC_INCONCLUSIVE ? "inconclusive for " : "UNDEFINED for ");
        old_element_text(&b, r->elem);
        if (r->result == PSPEC_INCONCLUSIVE)
            ps_buf_printf(&b, " (%" PRIu64 " record%s lost while it was open)", r->lost,
                          r->lost == 1 ? "" : "s");
        break;
    case PSPEC_REPORT_INTERVAL:
    case PSPEC_REPORT_EVENT:
        if (json) {
            ps_buf_putc(&b, '{');
            old_element_json(&b, r->elem);
            ps_buf_putc(&b, '}');
        } else {
            old_element_text(&b, r->elem);
        }
        break;
    case PSPEC_REPORT_OVERDUE:      /* inconclusive ones: issue 31 */
        if (json) {
            ps_buf_puts(&b, "{\"spec\":");
            old_json_string(&b, pspec_report_file(r));
            if (r->result == PSPEC_INCONCLUSIVE)
                ps_buf_printf(&b, ",\"assert\":null,\"line\":%u,\"result\":\"inconclusive\",\"lost\":%" PRIu64
                              ",\"kind\":\"overdue\",\"type\":", pspec_report_line(r), r->lost);
            else
                ps_buf_printf(&b, ",\"assert\":null,\"line\":%u,\"result\":\"fail\",\"kind\":\"overdue\",\"type\":",
                              pspec_report_line(r));
            old_json_string(&b, r->ivtype->name);
            ps_buf_printf(&b, ",\"start\":\"%" PRIu64 ".%u\",\"start_ts\":%" PRId64 ",\"age\":%.17g,\"within\":%.17g}",
                          r->elem->ev->pos, r->elem->ev->sub, r->elem->ev->ts, r->age, r->within);
            break;
        }
        old_where_text(&b, r);
        if (r->result == PSPEC_INCONCLUSIVE)
            ps_buf_printf(&b, "interval %s overdue (inconclusive): started %" PRIu64 ".%u ts %" PRId64 ", still open "
                          "%.10g ticks later (within %.10g; %" PRIu64 " record%s lost while it was open)",
                          r->ivtype->name, r->elem->ev->pos, r->elem->ev->sub, r->elem->ev->ts, r->age, r->within,
                          r->lost, r->lost == 1 ? "" : "s");
        else
            ps_buf_printf(&b, "interval %s overdue: started %" PRIu64 ".%u ts %" PRId64 ", still open %.10g ticks later (within %.10g)",
                          r->ivtype->name, r->elem->ev->pos, r->elem->ev->sub, r->elem->ev->ts, r->age, r->within);
        break;
    case PSPEC_REPORT_SUMMARY:       /* came after the printf-free formatters: not compared */
        break;
    case PSPEC_REPORT_UNCLOSED:     /* a note's own shape: issue 31 */
        if (json) {
            ps_buf_puts(&b, "{\"note\":\"unclosed\",\"spec\":");
            old_json_string(&b, pspec_report_file(r));
            ps_buf_printf(&b, ",\"line\":%u,\"type\":", pspec_report_line(r));
            old_json_string(&b, r->ivtype->name);
            ps_buf_printf(&b, ",\"count\":%" PRIu64 "}", r->count);
            break;
        }
        old_where_text(&b, r);
        ps_buf_printf(&b, "note: %" PRIu64 " interval%s of type %s still open at end of log (unclosed)", r->count,
                      r->count == 1 ? "" : "s", r->ivtype->name);
        break;
    case PSPEC_REPORT_PRINT:
    case PSPEC_REPORT_VALUE:
        if (json) {
            ps_buf_puts(&b, r->kind == PSPEC_REPORT_PRINT ? "{\"print\":" : "{\"value\":");
            old_format_json(&b, r->value);
            ps_buf_putc(&b, '}');
        } else if (r->value->kind == PV_STR) {
            ps_buf_puts(&b, r->value->str);
        } else {
            old_format(&b, r->value);
        }
        break;
    }
    return ps_buf_take(&b);
}

#endif
