/* Merging the checker's duration sketches (sketch.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sketch.h"

static int add_bucket(struct sketch *s, int sign, int32_t idx, double count)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct sketch_bucket *b = realloc(s->b, cap * sizeof *b);
		if (!b)
			return -ENOMEM;
		s->b = b;
		s->cap = cap;
	}
	s->b[s->n++] = (struct sketch_bucket){ sign, idx, count };
	s->count += count;
	return 0;
}

/* The buckets of one side ("pos" or "neg"): {"I":C,...}. */
static int add_side(struct sketch *s, const struct json *side, int sign)
{
	if (!side)
		return 0;
	if (side->kind != JSON_OBJECT)
		return -EINVAL;
	for (const struct json *m = side->kids; m; m = m->next) {
		char *end;
		long idx = strtol(m->key, &end, 10);
		if (*end || end == m->key || idx < -100000 || idx > 100000 ||
		    m->kind != JSON_NUMBER || !(m->num > 0))
			return -EINVAL;
		int rc = add_bucket(s, sign, (int32_t)idx, m->num);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sketch_add_json(struct sketch *s, const char *text, size_t len)
{
	struct json *root = json_parse(text, len, NULL, 0);
	const struct json *g;
	size_t before = s->n;
	double count = s->count;
	int rc = -EINVAL;

	if (!root)
		return errno == ENOMEM ? -ENOMEM : -EINVAL;
	g = json_get(root, "gamma");
	if (root->kind != JSON_OBJECT || !g || g->kind != JSON_NUMBER || !(g->num > 1) ||
	    (s->gamma && fabs(g->num - s->gamma) > 1e-9 * s->gamma))
		goto out;
	rc = add_side(s, json_get(root, "pos"), 1);
	if (rc == 0)
		rc = add_side(s, json_get(root, "neg"), -1);
	if (rc == 0) {
		s->gamma = g->num;
		double z = json_as_double(json_get(root, "zero"));
		if (z > 0) {
			s->zero += z;
			s->count += z;
		}
	} else {
		s->n = before;          /* all of it or nothing */
		s->count = count;
	}
out:
	json_free(root);
	return rc;
}

static double bucket_value(const struct sketch *s, const struct sketch_bucket *b)
{
	return b->sign * 2 * pow(s->gamma, b->idx) / (s->gamma + 1);
}

static int by_value(const void *a, const void *b)
{
	const struct sketch_bucket *x = a, *y = b;
	double vx = x->sign * (double)x->idx, vy = y->sign * (double)y->idx;

	/* negatives first, by decreasing index; then positives by increasing */
	if (x->sign != y->sign)
		return x->sign - y->sign;
	return (vx > vy) - (vx < vy);
}

int sketch_bins(struct sketch *s, struct cmp_bin **out, size_t *n)
{
	struct cmp_bin *v = malloc((s->n + 1) * sizeof *v);
	size_t k = 0, i = 0;

	if (!v)
		return -ENOMEM;
	qsort(s->b, s->n, sizeof *s->b, by_value);
	for (; i < s->n && s->b[i].sign < 0; i++) {
		if (k && v[k - 1].value == bucket_value(s, &s->b[i]))
			v[k - 1].count += s->b[i].count;
		else
			v[k++] = (struct cmp_bin){ bucket_value(s, &s->b[i]), s->b[i].count };
	}
	if (s->zero > 0)
		v[k++] = (struct cmp_bin){ 0, s->zero };
	for (; i < s->n; i++) {
		if (k && v[k - 1].value == bucket_value(s, &s->b[i]))
			v[k - 1].count += s->b[i].count;
		else
			v[k++] = (struct cmp_bin){ bucket_value(s, &s->b[i]), s->b[i].count };
	}
	*out = v;
	*n = k;
	return 0;
}

void sketch_free(struct sketch *s)
{
	free(s->b);
	memset(s, 0, sizeof *s);
}
