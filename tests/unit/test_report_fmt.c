/* test_report_fmt.c — the printf-free formatters (libpspec/src/report.c,
 * value_fmt.c, util.c's ps_buf_put_u64/i64) against the printf ones they
 * replaced (issue 14), kept verbatim in fmt_printf.h as old_*.
 *
 * Every case formats the same thing both ways, as text and as JSON, and
 * wants the same bytes: integers over the whole int64/uint64 range, numbers
 * (integral, near the 1e9 and 2^53 switches, beyond 2^63, -0, NaN, infinities,
 * subnormals, random bit patterns), triples, mappings, strings with every
 * byte, events and intervals, reports built by hand with extreme positions,
 * timestamps and uids, and every report of every tests/lang case (offline
 * and continuous, with -v, -e and --explain reports). Random inputs come
 * from a fixed seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "fmt_printf.h"

/* ---- helpers ---------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* How many comparisons were made, so a case that compares nothing fails. */
static unsigned long compared;

static void same(const char *what, const ps_buf *old, const ps_buf *new)
{
    compared++;
    if (old->len != new->len || memcmp(ps_buf_str(old), ps_buf_str(new), old->len) != 0)
        fail_msg("%s: printf gave \"%s\", now \"%s\"", what, ps_buf_str(old), ps_buf_str(new));
}

/* v as text and as JSON, both ways; also nested in a triple-free mapping so
 * strings go through the quoted form. */
static void check_value(const pv *v)
{
    ps_buf o = {0}, n = {0};
    old_format(&o, v);
    pv_format(&n, v);
    same("text", &o, &n);
    ps_buf_reset(&o);
    ps_buf_reset(&n);
    old_format_json(&o, v);
    pv_format_json(&n, v);
    same("json", &o, &n);
    ps_buf_free(&o);
    ps_buf_free(&n);
}

static void check_number(double x)
{
    pv v = pv_num(x);
    check_value(&v);
    /* as a mapping key and value (keys print with the number formatters) */
    if (isfinite(x)) {
        pv m = pv_map_set(pv_map_empty(), x, pv_num(x));
        check_value(&m);
        pv_free(m);
    }
}

/* ---- integers ---------------------------------------------------------------- */

static void check_u64(uint64_t u)
{
    char want[32];
    ps_buf n = {0};
    snprintf(want, sizeof want, "%" PRIu64, u);
    ps_buf_put_u64(&n, u);
    compared++;
    assert_string_equal(ps_buf_str(&n), want);
    ps_buf_free(&n);
}

static void check_i64(int64_t i)
{
    char want[32];
    ps_buf n = {0};
    snprintf(want, sizeof want, "%" PRId64, i);
    ps_buf_put_i64(&n, i);
    compared++;
    assert_string_equal(ps_buf_str(&n), want);
    ps_buf_free(&n);
}

static void test_integers(void **state)
{
    (void)state;
    for (uint64_t p = 1;; p *= 10) {
        for (int d = -2; d <= 2; d++) {
            check_u64(p + (uint64_t)d);
            check_i64((int64_t)(p + (uint64_t)d));
            check_i64(-(int64_t)(p + (uint64_t)d));
        }
        if (p > UINT64_MAX / 10)
            break;
    }
    for (int k = 0; k < 64; k++) {
        uint64_t p = 1ULL << k;
        check_u64(p - 1);
        check_u64(p);
        check_u64(p + 1);
        check_i64((int64_t)p);
        check_i64(-(int64_t)(p - 1));
    }
    const uint64_t us[] = {0, 1, 9, 10, 99, 100, 101, UINT64_MAX, UINT64_MAX - 1, (uint64_t)INT64_MAX,
                           (uint64_t)INT64_MAX + 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1};
    for (size_t i = 0; i < PS_ARRAY_LEN(us); i++)
        check_u64(us[i]);
    const int64_t is[] = {0, -1, 1, INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < PS_ARRAY_LEN(is); i++)
        check_i64(is[i]);
    for (int i = 0; i < 200000; i++) {
        uint64_t u = next() >> (next() % 64);   /* every width */
        check_u64(u);
        check_i64((int64_t)u);
        check_i64(-(int64_t)(u >> 1));
    }
    /* appending to a buffer that already holds text */
    ps_buf n = {0};
    ps_buf_puts(&n, "x=");
    ps_buf_put_i64(&n, -42);
    ps_buf_putc(&n, ',');
    ps_buf_put_u64(&n, 7);
    assert_string_equal(ps_buf_str(&n), "x=-42,7");
    ps_buf_free(&n);
}

/* ---- numbers ------------------------------------------------------------------ */

static void test_numbers_special(void **state)
{
    (void)state;
    const double xs[] = {0.0, -0.0, 1, -1, 0.5, -0.5, NAN, -NAN, INFINITY, -INFINITY, DBL_MAX, -DBL_MAX,
                         DBL_MIN, -DBL_MIN, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_EPSILON,
                         999999999, 1e9 - 1, 1e9, 1e9 + 1, -1e9, -(1e9 - 1), 999999999.5,
                         9007199254740991.0, 9007199254740992.0, 9007199254740993.0, 9007199254740994.0,
                         -9007199254740991.0, -9007199254740992.0, -9007199254740994.0,
                         9223372036854775807.0, 9223372036854775808.0, -9223372036854775808.0,
                         18446744073709551616.0, 1e19, 1e20, 1e21, 1e22, 1e23, 1e300, -1e300,
                         0.1, 0.2, 0.1 + 0.2, 191.48203125, 3641230271.0, 1.5e-7, 1e-4, 1e-5, 0.04,
                         123456789.5, 9.9999999995, 9.99999999949, 99999.999995, 1e-320, 4e-324};
    for (size_t i = 0; i < PS_ARRAY_LEN(xs); i++)
        check_number(xs[i]);
    for (int k = 0; k <= 70; k++) {
        double p = ldexp(1.0, k);
        for (int d = -3; d <= 3; d++) {
            check_number(p + d);
            check_number(-(p + d));
        }
    }
    for (int k = -30; k <= 30; k++) {
        double p = pow(10.0, k);
        check_number(p);
        check_number(-p);
        check_number(nextafter(p, 0));
        check_number(nextafter(p, INFINITY));
        check_number(p - 1);
        check_number(p + 1);
    }
    assert_true(compared > 0);
}

static void test_numbers_random(void **state)
{
    (void)state;
    for (int i = 0; i < 30000; i++) {
        check_number(bits_double(next()));                     /* any bits, NaNs included */
        check_number((double)(int64_t)(next() >> (next() % 64)) * (next() % 2 ? 1 : -1));
        double ip = (double)(int64_t)(next() % 2000000000) - 1e9;   /* integral, around the 1e9 switch */
        check_number(ip);
        double dec = (double)(int64_t)(next() % 100000000) / pow(10.0, (double)(next() % 12));
        check_number(dec);                                      /* short decimals */
        check_number(ldexp((double)(next() >> 11), (int)(next() % 200) - 100));
    }
}

static void test_triples(void **state)
{
    (void)state;
    const double xs[] = {0, -0.0, 1, -1, 0.5, 1e9, 9007199254740993.0, 1e300, NAN, INFINITY, 191.48203125};
    for (size_t i = 0; i < PS_ARRAY_LEN(xs); i++)
        for (size_t j = 0; j < PS_ARRAY_LEN(xs); j++)
            for (size_t k = 0; k < PS_ARRAY_LEN(xs); k++) {
                pv t = {.kind = PV_TRIPLE, .t = {xs[i], xs[j], xs[k]}};
                check_value(&t);
            }
    for (int i = 0; i < 20000; i++) {
        pv t = {.kind = PV_TRIPLE, .t = {bits_double(next()), (double)(next() % 100000),
                                         (double)(next() % 1000) / 7}};
        check_value(&t);
        pv ts = pv_timestamp((int64_t)next());
        check_value(&ts);
    }
}

/* ---- strings ------------------------------------------------------------------- */

static void check_string(const char *s)
{
    pv v = pv_str(s);
    check_value(&v);                    /* top level: text as is */
    pv m = pv_map_set(pv_map_empty(), 1, pv_str(s));
    check_value(&m);                    /* nested: quoted, escaped */
    pv_free(m);
    ps_buf o = {0}, n = {0};
    old_json_string(&o, s);
    pv_json_string(&n, s);
    same("json string", &o, &n);
    ps_buf_free(&o);
    ps_buf_free(&n);
}

static void test_strings(void **state)
{
    (void)state;
    char s[512];
    check_string("");
    check_string("plain text");
    check_string("quote \" backslash \\ tab \t newline \n cr \r ff \f bs \b del \x7f");
    check_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");          /* well-formed UTF-8 */
    check_string("\xc0\xaf \xe0\x80\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xff \xfe \x80"); /* not */
    check_string("\xc3");                                                /* cut short */
    check_string("\xe2\x82");
    pv nul = pv_str(NULL);
    check_value(&nul);
    ps_buf o = {0}, n = {0};
    old_json_string(&o, NULL);
    pv_json_string(&n, NULL);
    same("json NULL", &o, &n);
    ps_buf_free(&o);
    ps_buf_free(&n);
    for (int c = 1; c < 256; c++) {                 /* every byte, alone and in a run */
        snprintf(s, sizeof s, "%c", c);
        check_string(s);
        snprintf(s, sizeof s, "ab%ccd%c%c", c, c, c);
        check_string(s);
    }
    for (int i = 0; i < 20000; i++) {
        size_t len = next() % 40;
        for (size_t k = 0; k < len; k++) {
            unsigned char c = (unsigned char)(next() % 256);
            if (next() % 3)                         /* mostly printable */
                c = (unsigned char)(0x20 + next() % 95);
            s[k] = c ? (char)c : 'z';
        }
        s[len] = '\0';
        check_string(s);
    }
}

/* ---- events, intervals, mappings --------------------------------------------- */

struct fake_type {
    const char *name;
};

static void test_elements(void **state)
{
    (void)state;
    static const struct fake_type et = {"StartRead"}, it = {"Read"};
    const uint64_t poss[] = {0, 1, 9, 10, 1234567, UINT64_MAX};
    const uint32_t subs[] = {0, 1, 10, UINT32_MAX};
    const int64_t tss[] = {0, -1, 1000, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < PS_ARRAY_LEN(poss); i++)
        for (size_t j = 0; j < PS_ARRAY_LEN(subs); j++)
            for (size_t k = 0; k < PS_ARRAY_LEN(tss); k++) {
                pv_event *e = pv_event_new(&et, 0);
                e->pos = poss[i];
                e->sub = subs[j];
                e->ts = tss[k];
                e->timed = k % 2 == 0;
                pv v = pv_event_val(e);
                check_value(&v);
                pv m = pv_map_set(pv_map_empty(), 2, pv_copy(v));
                check_value(&m);
                pv_free(m);
                pv_free(v);
                pv_interval *iv = pv_interval_new(&it, 0);
                iv->uid = poss[i];
                pv w = pv_interval_val(iv);
                check_value(&w);
                pv_free(w);
            }
    pv_event *e = pv_event_new(NULL, 0);             /* no type: "?" */
    pv v = pv_event_val(e);
    check_value(&v);
    pv_free(v);
    /* a mapping of mixed values and keys */
    pv m = pv_map_empty();
    for (int i = 0; i < 200; i++) {
        double key = i % 2 ? bits_double(next() & ~(0x7ffULL << 52)) : (double)(int64_t)next();
        pv val = i % 3 == 0 ? pv_num(bits_double(next()))
               : i % 3 == 1 ? pv_triple_make((double)i, 1, 2.5)
                            : pv_bool(i % 4 == 0);
        m = pv_map_set(m, key, val);
    }
    check_value(&m);
    pv_free(m);
    pv u = pv_undef(), t = pv_bool(true), f = pv_bool(false);
    check_value(&u);
    check_value(&t);
    check_value(&f);
}

/* ---- reports built by hand ------------------------------------------------------ */

static void check_report(const pspec_report *r)
{
    for (int json = 0; json <= 1; json++) {
        pspec_format fmt = json ? PSPEC_FORMAT_JSON : PSPEC_FORMAT_TEXT;
        char *o = old_report_format(r, fmt);
        char *n = pspec_report_format(r, fmt);
        compared++;
        if (strcmp(o, n) != 0)
            fail_msg("report (%s): printf gave\n  %s\nnow\n  %s", json ? "json" : "text", o, n);
        /* the reused-buffer form gives the same line */
        static char *buf;
        static size_t cap;
        size_t len = pspec_report_format_into(r, fmt, &buf, &cap);
        assert_int_equal(len, strlen(o));
        assert_string_equal(buf, o);
        free(o);
        free(n);
    }
}

static void test_reports_by_hand(void **state)
{
    (void)state;
    ps_file file = {.path = "dir/fig3.pspec"};
    ps_file *files[] = {&file};
    ps_program prog = {0};
    prog.files.v = files;
    prog.files.n = 1;
    const char *attrs[] = {"tid", NULL, "size \"q\""};
    ps_evtype et = {.name = "StartRead", .attrs = attrs, .nattr = 3};
    ps_metric metrics[] = {{.name = "time"}, {.name = "hit"}, {.name = "t"}, {.name = "m"},
                           {.name = "s"}, {.name = "u"}};
    ps_ivtype it = {.name = "Read", .metrics = metrics, .nmetric = 6, .loc = {0, 7, 3}};
    ps_stmt st = {.kind = 0, .loc = {0, 12, 3}};

    const int64_t tss[] = {0, 1, -1, 999999999, 1000000000, INT64_MIN, INT64_MAX};
    const uint64_t big[] = {0, 1, 2, 10, 99, 1000000, UINT64_MAX};
    for (int i = 0; i < 2000; i++) {
        pv_event *s = pv_event_new(&et, 3), *e = pv_event_new(&et, 3);
        s->pos = big[next() % 7] + (next() % 2 ? next() % 1000 : 0);
        s->sub = (uint32_t)(next() % 3 == 0 ? next() : 0);
        s->ts = next() % 3 ? (int64_t)(next() % 100000000) : tss[next() % 7];
        s->thread = next() % 4 ? (int64_t)(next() % 8) : (int64_t)next();
        s->attr[0] = (double)(next() % 8);
        s->attr[1] = 5;
        s->attr[2] = next() % 4 ? (double)(512 << (next() % 8)) : next() % 2 ? PV_ATTR_UNDEF
                                                                  : bits_double(next());
        e->pos = s->pos + next() % 100;
        e->sub = 0;
        e->ts = next() % 2 ? (int64_t)((uint64_t)s->ts + next() % 40000000) : tss[next() % 7]; /* wraps */
        pv_interval *iv = pv_interval_new(&it, 6);
        iv->uid = next() % 4 ? next() % 1000000 : big[next() % 7];
        iv->start = s;
        iv->end = e;
        s->refs++;              /* one for the interval, one for evv */
        iv->metric[0] = pv_num(next() % 3 ? (double)e->ts - (double)s->ts : bits_double(next()));
        iv->metric[1] = pv_bool(next() % 2);
        iv->metric[2] = pv_triple_make((double)(next() % 100000), 1, (double)(next() % 7) / 3);
        iv->metric[3] = pv_map_set(pv_map_empty(), (double)(next() % 9), pv_num(0.25));
        iv->metric[4] = pv_str(next() % 2 ? "a \"b\"\n\xc3\xa9\x01" : "");
        iv->metric[5] = pv_undef();
        pv ivv = pv_interval_val(iv), evv = pv_event_val(s);

        st.label = next() % 2 ? "slow \"reads\"" : NULL;
        const pspec_result results[] = {PSPEC_FAIL, PSPEC_INCONCLUSIVE, PSPEC_UNDEFINED, PSPEC_PASS};
        pspec_report r = {.prog = &prog, .stmt = &st, .result = results[next() % 4],
                          .lost = next() % 3 ? next() % 3 : next()};
        r.kind = PSPEC_REPORT_OFFENDER;
        r.elem = &ivv;
        check_report(&r);
        r.elem = &evv;
        check_report(&r);
        r.kind = PSPEC_REPORT_INTERVAL;
        r.stmt = NULL;
        r.elem = &ivv;
        check_report(&r);
        r.kind = PSPEC_REPORT_EVENT;
        r.elem = &evv;
        check_report(&r);

        /* verdicts, with and without a witness */
        ps_witness wit[] = {{.name = "{mean r : Read : r.time}", .value = iv->metric[0]},
                            {.name = "x", .value = iv->metric[2]}};
        pspec_report a = {.kind = PSPEC_REPORT_ASSERT, .prog = &prog, .stmt = &st,
                          .result = results[next() % 4], .offenders = big[next() % 7],
                          .lost = big[next() % 7], .wit = wit, .nwit = (uint32_t)(next() % 3),
                          .false_part = next() % 2 ? "r.time <= 10 ms" : NULL};
        check_report(&a);

        pspec_report d = {.kind = PSPEC_REPORT_OVERDUE, .prog = &prog, .ivtype = &it, .elem = &evv,
                          .age = (double)(next() % 100000) / 3, .within = 1e7};
        if (next() % 2) {           /* records lost since it started */
            d.result = PSPEC_INCONCLUSIVE;
            d.lost = next() % 3 ? 1 + next() % 3 : big[next() % 7];
        }
        check_report(&d);
        pspec_report u = {.kind = PSPEC_REPORT_UNCLOSED, .prog = &prog, .ivtype = &it,
                          .count = big[next() % 7]};
        check_report(&u);
        pspec_report p = {.kind = next() % 2 ? PSPEC_REPORT_PRINT : PSPEC_REPORT_VALUE, .prog = &prog,
                          .stmt = &st, .value = &iv->metric[next() % 6]};
        check_report(&p);
        pv_free(ivv);
        pv_free(evv);
    }
}

/* ---- every report of every language test ---------------------------------------- */

static void on_report(void *ctx, const pspec_report *r)
{
    (void)ctx;
    check_report(r);
}

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    (void)ctx, (void)logname, (void)where, (void)msg;
}

/* The log a case names with '% log: FILE' (NULL for 'none'), or NAME.log. */
static char *case_log(const char *dir, const char *name, const char *specpath)
{
    char line[512];
    char *log = NULL;
    FILE *f = fopen(specpath, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p != '%')
                break;
            char file[256];
            if (sscanf(p, "%% log: %255s", file) == 1) {
                if (strcmp(file, "none") == 0) {
                    fclose(f);
                    return NULL;
                }
                log = ps_asprintf("%s/%s", dir, file);
            }
        }
        fclose(f);
    }
    return log ? log : ps_asprintf("%s/%s.log", dir, name);
}

static void test_lang_cases(void **state)
{
    (void)state;
    const char *dir = PSPEC_LANG_DIR;
    DIR *d = opendir(dir);
    assert_non_null(d);
    unsigned checked = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".pspec") != 0)
            continue;
        char *name = ps_strndup(de->d_name, len - 6);
        char *spec = ps_asprintf("%s/%s", dir, de->d_name);
        char *log = case_log(dir, name, spec);
        for (int cont = 0; cont <= 1 && log; cont++) {
            pspec *ps = pspec_new();
            pspec_set_search_path(ps, dir);
            int fd = -1;
            if (pspec_load_file(ps, spec) == 0 && (fd = open(log, O_RDONLY)) >= 0) {
                pspec_check_options opt = {.continuous = cont, .want_intervals = true, .want_events = true,
                                           .explain = true, .report = on_report, .warn = on_warn};
                char *err = NULL;
                unsigned long before = compared;
                pspec_check(ps, fd, log, &opt, &err);
                free(err);
                if (compared > before)
                    checked++;
            }
            if (fd >= 0)
                close(fd);
            pspec_free(ps);
        }
        free(log);
        free(spec);
        free(name);
    }
    closedir(d);
    /* offline and -cont: 104 runs with reports out of 95 cases today */
    print_message("%u runs of language tests, %lu comparisons in all\n", checked, compared);
    assert_true(checked >= 90);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_numbers_special),
        cmocka_unit_test(test_numbers_random),
        cmocka_unit_test(test_triples),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_elements),
        cmocka_unit_test(test_reports_by_hand),
        cmocka_unit_test(test_lang_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
