/* fuzz_json — the telemonitor's JSON reader and the one parser of checker
 * reports over it, on arbitrary bytes: a tree or one error message with an
 * offset inside the text, never a crash, hang or leak. Every node of a tree
 * is visited (its source text must lie inside the input and re-parse to
 * the same kind), the bytes are read as a checker report, and as metrics
 * rendered for a mail. And the bytes, whatever they are, written as a JSON
 * string by the suite's one writer (cmon/jsonstr.h, through both the
 * telemonitor's sb_json_str and libpspec's pv_json_string, which must
 * agree) are valid JSON: well-formed UTF-8, no raw control character, and
 * read back as one string. The telemonitor is a program, not a library, so
 * its sources are compiled in here. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/report.c"
#include "../../daemons/telemonitor/text.c"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Visit `v` and everything under it. */
static void walk(const struct json *v, const struct json *root, int depth)
{
    int64_t i;

    if (depth > JSON_DEPTH_MAX || v->src < root->src ||
        v->src + v->srclen > root->src + root->srclen)
        abort();
    (void)json_text(v);
    (void)json_as_int(v);
    (void)json_int64(v, &i);
    if (v->kind == JSON_STRING && v->str[v->len] != '\0')
        abort();
    if (depth < 3) {                       /* the source text is the value again */
        struct json *again = json_parse(v->src, v->srclen, NULL, 0);
        if (!again || again->kind != v->kind || again->count != v->count)
            abort();
        json_free(again);
    }
    for (const struct json *k = v->kids; k; k = k->next) {
        /* a key with \u0000 in it is kept but can never be asked for by
         * name (json_get compares whole C strings) */
        if (v->kind == JSON_OBJECT && strlen(k->key) == k->keylen && json_get(v, k->key) == NULL)
            abort();
        walk(k, root, depth + 1);
    }
}

/* `data` as a JSON string: valid, and the same from both callers. */
static void write_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    struct sbuf b = { 0 };
    ps_buf pb = { 0 };
    struct json *v;

    if (!s)
        return;
    memcpy(s, data, size);
    s[size] = '\0';                        /* (up to the first NUL, as C strings go) */
    sb_json_str(&b, s);
    pv_json_string(&pb, s);
    if (b.oom || !b.s || pb.len != b.len || memcmp(pb.data, b.s, b.len))
        abort();
    for (size_t i = 0; i < b.len;) {
        const unsigned char *p = (const unsigned char *)b.s + i;
        size_t n = cmon_utf8_len(p, b.len - i);
        if (n == 0 || *p < 0x20 || *p == 0x7f)
            abort();
        i += n;
    }
    v = json_parse(b.s, b.len, NULL, 0);
    if (!v || v->kind != JSON_STRING)
        abort();
    json_free(v);
    sb_free(&b);
    ps_buf_free(&pb);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[160];
    struct json *v;
    struct checker_report r;

    write_string(data, size);
    v = json_parse((const char *)data, size, err, sizeof err);

    if (v) {
        walk(v, v, 0);
        json_free(v);
    } else if (strncmp(err, "offset ", 7) || strtoull(err + 7, NULL, 10) > size) {
        abort();
    }
    if (report_parse((const char *)data, size, &r) == 0) {
        if (r.metrics)
            free(render_metrics(r.metrics));
        report_free(&r);
    }
    return 0;
}
