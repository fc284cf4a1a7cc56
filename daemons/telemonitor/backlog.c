/* The store's backlog (see backlog.h). */
#include <stdlib.h>
#include <string.h>

#include "backlog.h"

static const char *const kind_names[BK_NKINDS] = {
#define BK_NAME(e, s, k) [e] = s,
	BACKLOG_KINDS(BK_NAME)
#undef BK_NAME
};

static const bool kind_keyed[BK_NKINDS] = {
#define BK_KEYED(e, s, k) [e] = k,
	BACKLOG_KINDS(BK_KEYED)
#undef BK_KEYED
};

const char *backlog_kind_name(enum backlog_kind k)
{
	return (unsigned)k < BK_NKINDS ? kind_names[k] : "?";
}

struct bl_item *bl_item_new(enum backlog_kind kind, int stmt, uint64_t key,
			    const struct bl_value *v, unsigned n)
{
	size_t size = sizeof(struct bl_item) + n * sizeof(struct bl_value);
	struct bl_item *it;
	char *text;

	for (unsigned i = 0; i < n; i++)
		if (v[i].type == BV_TEXT || v[i].type == BV_BLOB)
			size += v[i].n + 1;
	it = malloc(size);
	if (!it)
		return NULL;
	memset(it, 0, sizeof *it);
	it->kind = kind;
	it->stmt = stmt;
	it->key = kind_keyed[kind] ? key : 0;
	it->bytes = size;
	it->nvals = n;
	text = (char *)&it->v[n];
	for (unsigned i = 0; i < n; i++) {
		it->v[i] = v[i];
		if (v[i].type != BV_TEXT && v[i].type != BV_BLOB)
			continue;
		if (v[i].n)
			memcpy(text, v[i].s, v[i].n);
		text[v[i].n] = '\0';
		it->v[i].s = text;
		text += v[i].n + 1;
	}
	return it;
}

void bl_item_free(struct bl_item *it)
{
	free(it);
}

void backlog_init(struct backlog *b, size_t max_failures, size_t max_bytes)
{
	memset(b, 0, sizeof *b);
	TAILQ_INIT(&b->items);
	for (int k = 0; k < BK_NKINDS; k++)
		TAILQ_INIT(&b->by_kind[k]);
	b->max_failures = max_failures;
	b->max_bytes = max_bytes;
}

static size_t bucket(const struct bl_item *it)
{
	uint64_t h = (it->key ^ ((uint64_t)it->kind << 56)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 54) % BACKLOG_HASH;
}

/* The held item with the kind and key of `it`, or NULL. */
static struct bl_item *find(const struct backlog *b, const struct bl_item *it)
{
	struct bl_item *h;

	for (h = b->hash[bucket(it)]; h; h = h->hnext)
		if (h->kind == it->kind && h->key == it->key)
			return h;
	return NULL;
}

const struct bl_item *backlog_find(const struct backlog *b, enum backlog_kind kind, uint64_t key)
{
	struct bl_item probe = { .kind = kind, .key = key };

	return find(b, &probe);
}

static void unhash(struct backlog *b, struct bl_item *it)
{
	struct bl_item **p = &b->hash[bucket(it)];

	while (*p && *p != it)
		p = &(*p)->hnext;
	if (*p)
		*p = it->hnext;
	it->hnext = NULL;
}

void backlog_remove(struct backlog *b, struct bl_item *it)
{
	TAILQ_REMOVE(&b->items, it, link);
	TAILQ_REMOVE(&b->by_kind[it->kind], it, kin);
	if (kind_keyed[it->kind])
		unhash(b, it);
	b->count[it->kind]--;
	b->total--;
	b->bytes -= it->bytes;
}

static void drop(struct backlog *b, struct bl_item *it)
{
	backlog_remove(b, it);
	b->dropped[it->kind]++;
	bl_item_free(it);
}

/* The oldest held item of an unkeyed kind (keyed: of a keyed kind). */
static struct bl_item *oldest(const struct backlog *b, bool keyed)
{
	struct bl_item *best = NULL, *h;

	for (int k = 0; k < BK_NKINDS; k++) {
		if (kind_keyed[k] != keyed || !(h = TAILQ_FIRST(&b->by_kind[k])))
			continue;
		if (!best || h->seq < best->seq)
			best = h;
	}
	return best;
}

/* Count `it` as held (already linked into the lists) and hash it. */
static void count_held(struct backlog *b, struct bl_item *it)
{
	if (kind_keyed[it->kind]) {
		size_t i = bucket(it);
		it->hnext = b->hash[i];
		b->hash[i] = it;
	}
	b->count[it->kind]++;
	b->total++;
	b->bytes += it->bytes;
}

void backlog_push(struct backlog *b, struct bl_item *it)
{
	struct bl_item *old;

	if (kind_keyed[it->kind] && (old = find(b, it))) {
		backlog_remove(b, old);          /* replaced by the newer row */
		bl_item_free(old);
	}
	it->seq = b->seq++;
	TAILQ_INSERT_TAIL(&b->items, it, link);
	TAILQ_INSERT_TAIL(&b->by_kind[it->kind], it, kin);
	count_held(b, it);
	b->pushed[it->kind]++;
	while (b->count[BK_FAILURE] > b->max_failures)
		drop(b, TAILQ_FIRST(&b->by_kind[BK_FAILURE]));
	while (b->bytes > b->max_bytes && b->total > 1) {
		struct bl_item *victim = oldest(b, false);
		if (!victim)
			victim = oldest(b, true);
		drop(b, victim);
	}
}

void backlog_unshift(struct backlog *b, struct bl_list *l)
{
	struct bl_item *it;

	while ((it = TAILQ_LAST(l, bl_list))) {
		TAILQ_REMOVE(l, it, link);
		if (kind_keyed[it->kind] && find(b, it)) {
			bl_item_free(it);            /* a newer row is held */
			continue;
		}
		TAILQ_INSERT_HEAD(&b->items, it, link);
		TAILQ_INSERT_HEAD(&b->by_kind[it->kind], it, kin);
		count_held(b, it);
	}
}

struct bl_item *backlog_first(const struct backlog *b)
{
	return TAILQ_FIRST(&b->items);
}

void backlog_clear(struct backlog *b)
{
	struct bl_item *it;

	while ((it = TAILQ_FIRST(&b->items))) {
		backlog_remove(b, it);
		bl_item_free(it);
	}
}
