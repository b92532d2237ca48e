/* Word n-gram hashing and scanning for tmax.decontam (loaded with ctypes by native.py).
 *
 * Tokenisation is TMAX's: a word is a maximal run of [a-z0-9] after lowercasing.
 * This file lowercases ASCII A-Z itself; Python lowercases non-ASCII texts before
 * encoding them, and every byte >= 0x80 is a separator, which matches the regex run
 * on the lowercased string.
 *
 * Input layout, shared by both entry points: text t is texts[t][0 .. lengths[t]) and
 * texts[t][lengths[t]] == 0 (Python passes the buffers of `bytes` objects, which CPython
 * always ends with a 0x00). That terminator is a separator, so it ends every word inside
 * its own text and the inner word loop needs no bounds check. A 0x00 inside a text is
 * only a separator: the window is reset per text, never from the byte value.
 *
 * Hashes (Python and C must agree, so the index side is hashed here too):
 *   word hash   w   = FNV-1a 64 over the word's lowercased bytes
 *   window      H_i = sum_{j<n} w_{i+j} * B^(n-1-j)   (mod 2^64, rolled in O(1))
 *   n-gram hash h_i = fmix64(H_i) & mask, with 0 replaced by 1 (0 marks an empty slot)
 * A hash match is only a candidate; Python verifies every one against exact tuples.
 */
#include <stdint.h>
#include <stdlib.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define ROLL_BASE 0x9e3779b97f4a7c15ULL
#define MAX_N 1024

/* LOWER[b] is the lowercased byte for a word byte ([A-Za-z0-9]), else 0. */
static uint8_t LOWER[256];
static int lower_ready = 0;

/* Called once by the loader before any thread scans, so scans only read LOWER. */
void tmax_init(void) {
    if (lower_ready) return;
    for (int b = 0; b < 256; b++) {
        uint8_t v = 0;
        if (b >= 'a' && b <= 'z') v = (uint8_t)b;
        else if (b >= 'A' && b <= 'Z') v = (uint8_t)(b - 'A' + 'a');
        else if (b >= '0' && b <= '9') v = (uint8_t)b;
        LOWER[b] = v;
    }
    lower_ready = 1;
}

static inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t finish(uint64_t window, uint64_t mask) {
    uint64_t h = fmix64(window) & mask;
    return h ? h : 1;
}

static inline uint64_t slot_of(uint64_t h, int slot_bits) {
    return (h * 0x9e3779b97f4a7c15ULL) >> (64 - slot_bits);
}

static uint64_t power(uint64_t base, int exp) {
    uint64_t r = 1;
    while (exp-- > 0) r *= base;
    return r;
}

/* The rolling state of one text: its words' hashes in a ring, and the window hash
 * of the last n of them. `advance` reads the next word; both the index and the scan
 * use it, so the two sides hash identically. */
typedef struct {
    const uint8_t *p, *end;
    uint64_t window;
    int64_t seen;
    int pos;
} roll_t;

/* Reads one word; returns 0 at the end of the text, else 1 (the window is complete
 * once r->seen >= n). */
static inline int advance(roll_t *r, uint64_t *ring, int32_t n, uint64_t top) {
    while (r->p < r->end && !LOWER[*r->p]) r->p++;
    if (r->p >= r->end) return 0;
    uint64_t w = FNV_OFFSET;
    uint8_t c;
    while ((c = LOWER[*r->p])) {
        w = (w ^ c) * FNV_PRIME;
        r->p++;
    }
    r->window = r->window * ROLL_BASE + w;
    if (r->seen >= n) r->window -= ring[r->pos] * top;
    ring[r->pos] = w;
    if (++r->pos == n) r->pos = 0;
    r->seen++;
    return 1;
}

/* Every n-gram hash of every text, in order. Returns the number of n-grams; only the
 * first `cap` are written to `out` (call again with a larger buffer if it is larger). */
int64_t tmax_ngram_hashes(const uint8_t *const *texts, const int64_t *lengths, int64_t n_texts,
                          int32_t n, uint64_t mask, uint64_t *out, int64_t cap) {
    if (n < 1 || n > MAX_N) return -1;
    if (!lower_ready) tmax_init();
    const uint64_t top = power(ROLL_BASE, n);
    uint64_t ring[MAX_N];
    int64_t count = 0;
    for (int64_t t = 0; t < n_texts; t++) {
        roll_t r = {texts[t], texts[t] + lengths[t], 0, 0, 0};
        while (advance(&r, ring, n, top)) {
            if (r.seen >= n) {
                if (count < cap) out[count] = finish(r.window, mask);
                count++;
            }
        }
    }
    return count;
}

/* Insert hashes into an open-addressing table (linear probing, 2^slot_bits slots,
 * 0 = empty; duplicates are stored once) and set their bits in the prefilter bitmap
 * (2^bitmap_bits bits, indexed by the hash's low bits). Returns the distinct count. */
int64_t tmax_table_insert(const uint64_t *hashes, int64_t count, uint64_t *slots,
                          int32_t slot_bits, uint64_t *bitmap, int32_t bitmap_bits) {
    const uint64_t slot_mask = (1ULL << slot_bits) - 1;
    const uint64_t bit_mask = (1ULL << bitmap_bits) - 1;
    int64_t distinct = 0;
    for (int64_t k = 0; k < count; k++) {
        uint64_t h = hashes[k];
        uint64_t b = h & bit_mask;
        bitmap[b >> 6] |= 1ULL << (b & 63);
        uint64_t s = slot_of(h, slot_bits);
        while (slots[s] && slots[s] != h) s = (s + 1) & slot_mask;
        if (!slots[s]) {
            slots[s] = h;
            distinct++;
        }
    }
    return distinct;
}

/* Scan texts for n-grams whose hash is in the table. For the k-th candidate, writes
 * hit_text[k] (index into this call's texts) and hit_word[k] (index of the n-gram's
 * first word in its text), in text order then word order, and returns the number of
 * candidates written. Texts are reported whole: when the output is full, the text
 * being scanned is dropped, *texts_done says how many texts were finished, and the
 * caller resumes from there (with a larger buffer if *texts_done is 0). */
int64_t tmax_scan(const uint8_t *const *texts, const int64_t *lengths, int64_t n_texts, int32_t n,
                  uint64_t mask, const uint64_t *slots, int32_t slot_bits,
                  const uint64_t *bitmap, int32_t bitmap_bits, int32_t *hit_text,
                  int32_t *hit_word, int64_t cap, int64_t *texts_done) {
    if (n < 1 || n > MAX_N) return -1;
    if (!lower_ready) tmax_init();
    const uint64_t top = power(ROLL_BASE, n);
    const uint64_t slot_mask = (1ULL << slot_bits) - 1;
    const uint64_t bit_mask = (1ULL << bitmap_bits) - 1;
    uint64_t ring[MAX_N];
    int64_t count = 0;
    for (int64_t t = 0; t < n_texts; t++) {
        roll_t r = {texts[t], texts[t] + lengths[t], 0, 0, 0};
        const int64_t text_start = count;
        while (advance(&r, ring, n, top)) {
            if (r.seen < n) continue;
            uint64_t h = finish(r.window, mask);
            uint64_t b = h & bit_mask;
            if (!((bitmap[b >> 6] >> (b & 63)) & 1)) continue;
            uint64_t s = slot_of(h, slot_bits);
            while (slots[s] && slots[s] != h) s = (s + 1) & slot_mask;
            if (!slots[s]) continue;
            if (count == cap) {
                *texts_done = t;
                return text_start;
            }
            hit_text[count] = (int32_t)t;
            hit_word[count] = (int32_t)(r.seen - n);
            count++;
        }
    }
    *texts_done = n_texts;
    return count;
}
