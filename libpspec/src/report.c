/* report.c — formatting reports as text lines or JSON objects.
 *
 * The lines of offenders (and of -v/-e) are appended piece by piece, without
 * printf: a log with many offenders spent a third of pcheck's time in
 * vfprintf (issue 14). The text is byte for byte what the printf formats
 * gave; tests/unit/test_report_fmt.c keeps the printf version and compares.
 */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

pspec_report_kind pspec_report_kind_of(const pspec_report *r) { return r->kind; }
pspec_result pspec_report_result(const pspec_report *r) { return r->result; }
uint64_t pspec_report_offenders(const pspec_report *r) { return r->offenders; }
uint64_t pspec_report_lost(const pspec_report *r) { return r->lost; }
uint64_t pspec_report_count(const pspec_report *r) { return r->count; }

const char *pspec_report_file(const pspec_report *r)
{
    if (r->ivtype)
        return r->prog->files.v[r->ivtype->loc.file]->path;
    return r->stmt ? r->prog->files.v[r->stmt->loc.file]->path : NULL;
}

unsigned pspec_report_line(const pspec_report *r)
{
    return r->ivtype ? r->ivtype->loc.line : r->stmt ? r->stmt->loc.line : 0;
}
const char *pspec_report_label(const pspec_report *r) { return r->stmt ? r->stmt->label : NULL; }

const char *pspec_report_type(const pspec_report *r)
{
    if (r->ivtype)
        return r->ivtype->name;
    if (!r->elem)
        return NULL;
    if (r->elem->kind == PV_EVENT)
        return pv_type_name(r->elem->ev->type);
    if (r->elem->kind == PV_INTERVAL)
        return pv_type_name(r->elem->iv->type);
    return NULL;
}

uint64_t pspec_report_uid(const pspec_report *r)
{
    return r->elem && r->elem->kind == PV_INTERVAL ? r->elem->iv->uid : 0;
}

int64_t pspec_report_start_ts(const pspec_report *r)
{
    if (!r->elem)
        return 0;
    return r->elem->kind == PV_INTERVAL ? r->elem->iv->start->ts : r->elem->ev->ts;
}

int64_t pspec_report_end_ts(const pspec_report *r)
{
    if (!r->elem)
        return 0;
    return r->elem->kind == PV_INTERVAL ? r->elem->iv->end->ts : r->elem->ev->ts;
}

static const char *result_word(pspec_result r)
{
    return r == PSPEC_PASS ? "pass" : r == PSPEC_FAIL ? "fail"
         : r == PSPEC_INCONCLUSIVE ? "inconclusive" : "undefined";
}

static void pos_text(ps_buf *b, const pv_event *e)
{
    pv_format_pos(b, e);
}

/* A string as "%s" gives it (glibc writes "(null)" for NULL). */
static void str_text(ps_buf *b, const char *s)
{
    ps_buf_puts(b, s ? s : "(null)");
}

/* The fields of an element — attributes of an event, metrics of an interval —
 * as (name, value) pairs; unnamed attributes ('?') are skipped. */
static uint32_t nfields(const pv *elem)
{
    return elem->kind == PV_EVENT ? elem->ev->nattr : elem->iv->nmetric;
}

static bool field_at(const pv *elem, uint32_t i, const char **name, pv *value)
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
static void fields_text(ps_buf *b, const pv *elem)
{
    bool first = true;
    for (uint32_t i = 0; i < nfields(elem); i++) {
        const char *name;
        pv v;
        if (!field_at(elem, i, &name, &v))
            continue;
        ps_buf_puts(b, first ? " " : ", ");
        str_text(b, name);
        ps_buf_puts(b, " = ");
        first = false;
        pv_format(b, &v);
    }
}

/* {"name":value,...} */
static void fields_json(ps_buf *b, const pv *elem)
{
    bool first = true;
    ps_buf_putc(b, '{');
    for (uint32_t i = 0; i < nfields(elem); i++) {
        const char *name;
        pv v;
        if (!field_at(elem, i, &name, &v))
            continue;
        if (!first)
            ps_buf_putc(b, ',');
        first = false;
        pv_json_string(b, name);
        ps_buf_putc(b, ':');
        pv_format_json(b, &v);
    }
    ps_buf_putc(b, '}');
}

/* ,"units":{"time":"ns",...}: the unit of each of an interval's metrics that
 * has one — a duration, ts(e) - ts(s), is in log ticks, nanoseconds
 * (ps_metric_is_duration). Nothing when no metric has a unit. */
static void units_json(ps_buf *b, const pv *elem)
{
    const ps_ivtype *t;
    bool first = true;

    if (elem->kind != PV_INTERVAL)
        return;
    t = elem->iv->type;
    for (uint32_t i = 0; i < elem->iv->nmetric; i++) {
        if (!ps_metric_is_duration(t, t->metrics[i].expr))
            continue;
        ps_buf_puts(b, first ? ",\"units\":{" : ",");
        first = false;
        pv_json_string(b, t->metrics[i].name);
        ps_buf_puts(b, ":\"ns\"");
    }
    if (!first)
        ps_buf_putc(b, '}');
}

/* "Read #17 start 12.0 ts 1000, end 14.0 ts 9200:" / "CacheHit 5.0 ts 1800 thread 7:" */
static void element_text(ps_buf *b, const pv *elem)
{
    if (elem->kind == PV_INTERVAL) {
        const pv_interval *iv = elem->iv;
        str_text(b, pv_type_name(iv->type));
        ps_buf_puts(b, " #");
        ps_buf_put_u64(b, iv->uid);
        ps_buf_puts(b, " start ");
        pos_text(b, iv->start);
        ps_buf_puts(b, " ts ");
        ps_buf_put_i64(b, iv->start->ts);
        ps_buf_puts(b, ", end ");
        pos_text(b, iv->end);
        ps_buf_puts(b, " ts ");
        ps_buf_put_i64(b, iv->end->ts);
        ps_buf_putc(b, ':');
    } else {
        const pv_event *e = elem->ev;
        str_text(b, pv_type_name(e->type));
        ps_buf_putc(b, ' ');
        pos_text(b, e);
        ps_buf_puts(b, " ts ");
        ps_buf_put_i64(b, e->ts);
        ps_buf_puts(b, " thread ");
        ps_buf_put_i64(b, e->thread);
        ps_buf_putc(b, ':');
    }
    fields_text(b, elem);
}

static void element_json(ps_buf *b, const pv *elem)
{
    if (elem->kind == PV_INTERVAL) {
        const pv_interval *iv = elem->iv;
        ps_buf_puts(b, "\"kind\":\"interval\",\"type\":");
        pv_json_string(b, pv_type_name(iv->type));
        ps_buf_puts(b, ",\"uid\":");
        ps_buf_put_u64(b, iv->uid);
        ps_buf_puts(b, ",\"start\":\"");
        pos_text(b, iv->start);
        ps_buf_puts(b, "\",\"end\":\"");
        pos_text(b, iv->end);
        ps_buf_puts(b, "\",\"start_ts\":");
        ps_buf_put_i64(b, iv->start->ts);
        ps_buf_puts(b, ",\"end_ts\":");
        ps_buf_put_i64(b, iv->end->ts);
        ps_buf_puts(b, ",\"metrics\":");
    } else {
        const pv_event *e = elem->ev;
        ps_buf_puts(b, "\"kind\":\"event\",\"type\":");
        pv_json_string(b, pv_type_name(e->type));
        ps_buf_puts(b, ",\"uid\":\"");
        pos_text(b, e);
        ps_buf_puts(b, "\",\"start\":\"");
        pos_text(b, e);
        ps_buf_puts(b, "\",\"end\":\"");
        pos_text(b, e);
        ps_buf_puts(b, "\",\"start_ts\":");
        ps_buf_put_i64(b, e->ts);
        ps_buf_puts(b, ",\"end_ts\":");
        ps_buf_put_i64(b, e->ts);
        ps_buf_puts(b, ",\"thread\":");
        ps_buf_put_i64(b, e->thread);
        ps_buf_puts(b, ",\"metrics\":");
    }
    fields_json(b, elem);
    units_json(b, elem);
}

bool pspec_report_is_interval(const pspec_report *r)
{
    return r->elem && r->elem->kind == PV_INTERVAL;
}

size_t pspec_report_position(const pspec_report *r, bool end, char *buf, size_t size)
{
    const pv_event *e;
    ps_buf b = {0};
    size_t n;

    if (!r->elem || (r->elem->kind != PV_INTERVAL && r->elem->kind != PV_EVENT)) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    e = r->elem->kind == PV_EVENT ? r->elem->ev : end ? r->elem->iv->end : r->elem->iv->start;
    pv_format_pos(&b, e);
    n = b.len < size ? b.len : size ? size - 1 : 0;
    if (size) {
        memcpy(buf, b.data, n);
        buf[n] = '\0';
    }
    free(b.data);
    return n;
}

size_t pspec_report_metrics_into(const pspec_report *r, char **buf, size_t *cap)
{
    ps_buf b = {.data = *buf, .len = 0, .cap = *buf ? *cap : 0};
    ps_buf_reset(&b);
    if (r->elem && (r->elem->kind == PV_INTERVAL || r->elem->kind == PV_EVENT))
        fields_json(&b, r->elem);
    else
        ps_buf_puts(&b, "{}");
    *buf = b.data;
    *cap = b.cap;
    return b.len;
}

/* "FILE:LINE: " plus the label, for assertion-related lines. */
static void where_text(ps_buf *b, const pspec_report *r)
{
    str_text(b, pspec_report_file(r));
    ps_buf_putc(b, ':');
    ps_buf_put_u64(b, pspec_report_line(r));
    ps_buf_puts(b, ": ");
}

bool pspec_report_is_stats(const pspec_report *r)
{
    const ps_expr *e = r->stmt ? r->stmt->expr : NULL;

    if (r->kind != PSPEC_REPORT_ASSERT && r->kind != PSPEC_REPORT_OFFENDER)
        return false;
    if (!e || e->kind != X_AGG || e->agg->op != PV_AGG_ALL || e->agg->place != AGG_TOP)
        return false;
    return (e->agg->ev || e->agg->iv) && e->agg->value && e->agg->value->kind == X_BOOL &&
           !e->agg->value->b;
}

/* The head of an assertion's line; a report assertion says so ("report":true). */
static void assert_json_head(ps_buf *b, const pspec_report *r)
{
    ps_buf_puts(b, "{\"spec\":");
    pv_json_string(b, pspec_report_file(r));
    ps_buf_puts(b, ",\"assert\":");
    if (r->stmt->label)
        pv_json_string(b, r->stmt->label);
    else
        ps_buf_puts(b, "null");
    ps_buf_puts(b, ",\"line\":");
    ps_buf_put_u64(b, r->stmt->loc.line);
    ps_buf_puts(b, ",\"result\":\"");
    ps_buf_puts(b, result_word(r->result));
    ps_buf_putc(b, '"');
    if (r->result == PSPEC_INCONCLUSIVE) {
        ps_buf_puts(b, ",\"lost\":");
        ps_buf_put_u64(b, r->lost);
    }
    if (pspec_report_is_stats(r))
        ps_buf_puts(b, ",\"report\":true");
}

/* A summary of an interval type's durations (pcheck --summaries). */
static void summary_format(ps_buf *b, const pspec_report *r, bool json)
{
    const ps_summary *s = r->summary;
    const char *metric = s->type->metrics[s->metric].name;

    if (!json) {
        where_text(b, r);
        ps_buf_printf(b, "summary of %s.%s from %.10g s to %.10g s: %" PRIu64 " interval%s, mean %.10g ns, "
                      "min %.10g, max %.10g", s->type->name, metric, (double)r->from_ns / 1e9,
                      (double)r->to_ns / 1e9, s->count, s->count == 1 ? "" : "s", s->sum / (double)s->count,
                      s->min, s->max);
        return;
    }
    ps_buf_puts(b, "{\"summary\":true,\"spec\":");
    pv_json_string(b, pspec_report_file(r));
    ps_buf_printf(b, ",\"line\":%u,\"type\":", pspec_report_line(r));
    pv_json_string(b, s->type->name);
    ps_buf_puts(b, ",\"metric\":");
    pv_json_string(b, metric);
    ps_buf_printf(b, ",\"from\":%" PRId64 ",\"to\":%" PRId64, r->from_ns, r->to_ns);
    ps_buf_printf(b, ",\"count\":%" PRIu64 ",\"sum\":%.17g,\"sumsq\":%.17g,\"min\":%.17g,\"max\":%.17g,"
                  "\"unit\":\"ns\",\"sketch\":{\"gamma\":%.17g,\"zero\":%" PRIu64,
                  s->count, s->sum, s->sumsq, s->min, s->max, PS_SUMMARY_GAMMA, s->zero);
    for (int side = 0; side < 2; side++) {
        bool first = true;
        ps_buf_puts(b, side ? ",\"neg\":{" : ",\"pos\":{");
        for (int k = s->lo[side]; k <= s->hi[side]; k++) {
            uint64_t c = ps_summary_bucket(s, side, k);
            if (!c)
                continue;
            ps_buf_printf(b, "%s\"%d\":%" PRIu64, first ? "" : ",", k - PS_SUMMARY_BUCKETS / 2, c);
            first = false;
        }
        ps_buf_putc(b, '}');
    }
    ps_buf_puts(b, "}}");
}

/* Appends the report's line to b. */
static void report_format(ps_buf *b, const pspec_report *r, pspec_format fmt)
{
    bool json = fmt == PSPEC_FORMAT_JSON;
    switch (r->kind) {
    case PSPEC_REPORT_ASSERT:
        if (json) {
            assert_json_head(b, r);
            ps_buf_printf(b, ",\"offenders\":%" PRIu64, r->offenders);
            if (r->false_part) {
                ps_buf_puts(b, ",\"false_part\":");
                pv_json_string(b, r->false_part);
            }
            if (r->nwit) {
                ps_buf_puts(b, ",\"witness\":{");
                for (uint32_t i = 0; i < r->nwit; i++) {
                    if (i)
                        ps_buf_putc(b, ',');
                    pv_json_string(b, r->wit[i].name);
                    ps_buf_putc(b, ':');
                    pv_format_json(b, &r->wit[i].value);
                }
                ps_buf_putc(b, '}');
            }
            ps_buf_putc(b, '}');
            break;
        }
        where_text(b, r);
        ps_buf_puts(b, "assertion ");
        if (r->stmt->label)
            ps_buf_printf(b, "\"%s\" ", r->stmt->label);
        ps_buf_puts(b, r->result == PSPEC_PASS ? "held" : r->result == PSPEC_FAIL ? "failed"
                        : r->result == PSPEC_INCONCLUSIVE ? "is inconclusive" : "is UNDEFINED");
        if (r->result == PSPEC_INCONCLUSIVE && r->offenders)
            ps_buf_printf(b, " (%" PRIu64 " offender%s over lost records; %" PRIu64 " record%s lost)",
                          r->offenders, r->offenders == 1 ? "" : "s", r->lost, r->lost == 1 ? "" : "s");
        else if (r->result == PSPEC_INCONCLUSIVE)
            ps_buf_printf(b, " (%" PRIu64 " record%s lost)", r->lost, r->lost == 1 ? "" : "s");
        else if (r->offenders)
            ps_buf_printf(b, " (%" PRIu64 " offender%s)", r->offenders, r->offenders == 1 ? "" : "s");
        if (r->false_part)
            ps_buf_printf(b, " at %s", r->false_part);
        for (uint32_t i = 0; i < r->nwit; i++) {
            ps_buf_puts(b, i ? "; " : ": where ");
            ps_buf_printf(b, "%s = ", r->wit[i].name);
            pv_format(b, &r->wit[i].value);
        }
        break;
    case PSPEC_REPORT_OFFENDER:
        if (json) {
            assert_json_head(b, r);
            ps_buf_putc(b, ',');
            element_json(b, r->elem);
            ps_buf_putc(b, '}');
            break;
        }
        where_text(b, r);
        if (r->stmt->label) {
            ps_buf_putc(b, '"');
            ps_buf_puts(b, r->stmt->label);
            ps_buf_puts(b, "\" ");
        }
        ps_buf_puts(b, r->result == PSPEC_FAIL ? "failed for "
                        : r->result == PSPEC_INCONCLUSIVE ? "inconclusive for " : "UNDEFINED for ");
        element_text(b, r->elem);
        if (r->result == PSPEC_INCONCLUSIVE) {
            ps_buf_puts(b, " (");
            ps_buf_put_u64(b, r->lost);
            ps_buf_puts(b, r->lost == 1 ? " record lost while it was open)" : " records lost while it was open)");
        }
        break;
    case PSPEC_REPORT_INTERVAL:
    case PSPEC_REPORT_EVENT:
        if (json) {
            ps_buf_putc(b, '{');
            element_json(b, r->elem);
            ps_buf_putc(b, '}');
        } else {
            element_text(b, r->elem);
        }
        break;
    case PSPEC_REPORT_OVERDUE:
        /* a failure, or inconclusive when records were lost since its start */
        if (json) {
            bool unsure = r->result == PSPEC_INCONCLUSIVE;
            ps_buf_puts(b, "{\"spec\":");
            pv_json_string(b, pspec_report_file(r));
            ps_buf_printf(b, ",\"assert\":null,\"line\":%u,\"result\":\"%s\"", pspec_report_line(r),
                          unsure ? "inconclusive" : "fail");
            if (unsure)
                ps_buf_printf(b, ",\"lost\":%" PRIu64, r->lost);
            ps_buf_puts(b, ",\"kind\":\"overdue\",\"type\":");
            pv_json_string(b, r->ivtype->name);
            ps_buf_printf(b, ",\"start\":\"%" PRIu64 ".%u\",\"start_ts\":%" PRId64 ",\"age\":%.17g,\"within\":%.17g}",
                          r->elem->ev->pos, r->elem->ev->sub, r->elem->ev->ts, r->age, r->within);
            break;
        }
        where_text(b, r);
        ps_buf_printf(b, "interval %s overdue%s: started %" PRIu64 ".%u ts %" PRId64 ", still open %.10g ticks later (within %.10g",
                      r->ivtype->name, r->result == PSPEC_INCONCLUSIVE ? " (inconclusive)" : "", r->elem->ev->pos,
                      r->elem->ev->sub, r->elem->ev->ts, r->age, r->within);
        if (r->result == PSPEC_INCONCLUSIVE)
            ps_buf_printf(b, "; %" PRIu64 " record%s lost while it was open", r->lost, r->lost == 1 ? "" : "s");
        ps_buf_putc(b, ')');
        break;
    case PSPEC_REPORT_UNCLOSED:
        /* a note, not a verdict: no assert or result keys (DESIGN.md §9) */
        if (json) {
            ps_buf_puts(b, "{\"note\":\"unclosed\",\"spec\":");
            pv_json_string(b, pspec_report_file(r));
            ps_buf_printf(b, ",\"line\":%u,\"type\":", pspec_report_line(r));
            pv_json_string(b, r->ivtype->name);
            ps_buf_printf(b, ",\"count\":%" PRIu64 "}", r->count);
            break;
        }
        where_text(b, r);
        ps_buf_printf(b, "note: %" PRIu64 " interval%s of type %s still open at end of log (unclosed)", r->count,
                      r->count == 1 ? "" : "s", r->ivtype->name);
        break;
    case PSPEC_REPORT_SUMMARY:
        summary_format(b, r, json);
        break;
    case PSPEC_REPORT_PRINT:
    case PSPEC_REPORT_VALUE:
        if (json) {
            ps_buf_puts(b, r->kind == PSPEC_REPORT_PRINT ? "{\"print\":" : "{\"value\":");
            pv_format_json(b, r->value);
            ps_buf_putc(b, '}');
        } else if (r->value->kind == PV_STR) {
            ps_buf_puts(b, r->value->str);
        } else {
            pv_format(b, r->value);
        }
        break;
    }
}

char *pspec_report_format(const pspec_report *r, pspec_format fmt)
{
    ps_buf b = {0};
    report_format(&b, r, fmt);
    return ps_buf_take(&b);
}

size_t pspec_report_format_into(const pspec_report *r, pspec_format fmt, char **buf, size_t *cap)
{
    ps_buf b = {.data = *buf, .len = 0, .cap = *buf ? *cap : 0};
    ps_buf_reset(&b);
    report_format(&b, r, fmt);
    if (!b.data)
        ps_buf_grow(&b, 0);
    *buf = b.data;
    *cap = b.cap;
    return b.len;
}
