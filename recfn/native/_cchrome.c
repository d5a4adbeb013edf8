/* recfn.native._cchrome: a native decoder for the common shape of Chrome trace events (compiled builds
 * only); recfn.formats.chrome._reader falls back to msgspec for everything else.
 *
 * decode(text, max_depth, sequence_default, fwd_default) reads a JSON list of trace events (what
 * recfn.formats.chrome._reader.decode_events gets) in one pass and returns the columns of its
 * complete ("X") events: ts/dur as int64 nanoseconds (`to_ns`; INT64_MIN where absent), pid/tid
 * int64 (strings, such as torch's "Spans", apart: "pid.text.*" their positions, codes and values),
 * name/cat as int32 codes (-1: absent) into their distinct strings (in order of first use),
 * recfn's ids, torch's "Sequence number" and "Fwd thread id" args, and each event's args as
 * compact JSON text (the bytes msgspec.json.format(indent=-1) gives: whitespace between tokens
 * dropped, strings and numbers as written; "null" when absent). torch's "Input Dims" and "Input
 * type" args (record_shapes) are read into the buffers of Arrow arrays (list<list<int64>>,
 * list<string>) where every complete event's values are of the simple form (null, or lists of
 * nulls and lists of int64 integers and nulls; null, or lists of strings and nulls): the batch's
 * "input_shapes" and "input_dtypes" are None otherwise, and the caller decodes those from the args
 * text; () where no complete event has either.
 * Flow events ("s", "t", "f") of the form torch writes (ts, pid, tid and an integer id; name,
 * cat and bp strings or absent; no args) and torch's memory instants ("[memory]" with Bytes,
 * Device Type and Device Id integers among flat args of plain values) become columns too
 * ("columnar.*": ts, pid, tid, name and cat codes, phase, their position among the batch's
 * events that are not complete, the args the msgspec path gives them as JSON text, and a
 * memory instant's Bytes, Device Type (INT64_MIN: none) and Device Id).
 * The other events (instants, counters, B/E, metadata, other flows) are returned as the JSON
 * list of their texts, for msgspec to decode, with "others.large": whether any of their ts/dur
 * may be a float that lost nanoseconds (which recfn.formats.chrome._times.exact_times then reads
 * from the text; where it is false, that would change nothing).
 *
 * It returns None for any batch it does not fully understand, so that the caller decodes it as
 * before (and reports its errors as before): JSON it rejects, fields that recfn.formats.chrome._reader's
 * Event struct lacks or duplicated fields, keys with escapes, "X" events with kept fields (s, id,
 * bp), names that are not strings, pid/tid that are neither int64 integers nor strings, ids
 * that are not int64 integers, numbers it cannot convert exactly, invalid UTF-8, lone
 * surrogates, nesting deeper than max_depth. No Python object is made until the batch is known
 * to fit.
 *
 * With a sixth argument `bare` true, the text is the list's members alone (what lies between
 * its brackets). The args text is bytes, or with a fifth argument `allocate` (not None), the
 * writable buffer that allocate(size) returns, filled ("args.has_input_dims": whether the text
 * holds the key "Input Dims" anywhere, as a substring).
 *
 * decode keeps the last batch's buffers for the next one; release() frees them (recfn.formats.chrome
 * calls it when a read ends).
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* memmem */
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "recfn_constants.h"

#define OK 0
#define FAILED (-1) /* a Python exception is set */
#define NOT_FAST 1  /* not the fast shape: the caller decodes the batch with msgspec */

#define RETURN_IF(call)             \
    do {                            \
        int rc_ = (call);           \
        if (rc_ != OK) return rc_;  \
    } while (0)

typedef const unsigned char *Ptr;

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline)) /* off the common path: keeps its callers tight */
#else
#define NOINLINE
#endif

/* -- growable byte buffers ------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (extra <= b->cap - b->len) return OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) {
        if (cap > (size_t)PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return FAILED;
        }
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    b->data = data;
    b->cap = cap;
    return OK;
}

/* Copies `n` bytes; the short copies of single tokens (most of them) inline, as two
 * overlapping moves of fixed size that read nothing outside `src`, rather than a call. */
static inline void copy_bytes(char *dst, const unsigned char *src, size_t n) {
    uint64_t a, b;
    uint32_t c, d;
    if (n >= 8 && n <= 16) {
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(&c, src, 4);
        memcpy(&d, src + n - 4, 4);
        memcpy(dst, &c, 4);
        memcpy(dst + n - 4, &d, 4);
    } else if (n > 16) {
        memcpy(dst, src, n);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = (char)src[i];
    }
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return OK;
    if (n > b->cap - b->len) RETURN_IF(buf_reserve(b, n));
    copy_bytes(b->data + b->len, src, n);
    b->len += n;
    return OK;
}

static inline int buf_byte(Buf *b, unsigned char c) { return buf_put(b, &c, 1); }

static PyObject *buf_bytes(const Buf *b) {
    return PyBytes_FromStringAndSize(b->len ? b->data : "", (Py_ssize_t)b->len);
}

/* -- scanning: each function starts at its token and leaves p after it ---------------------- */

typedef struct {
    Ptr p, end;
    int max_depth;
} Parser;

static const unsigned char SPACE[256] = {[' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

static inline void skip_space(Parser *ps) {
    while (ps->p < ps->end && SPACE[*ps->p]) ps->p++;
}

/* The next byte after whitespace, -1 at the end of the text. */
static inline int peek(Parser *ps) {
    skip_space(ps);
    return ps->p < ps->end ? *ps->p : -1;
}

/* The next byte after whitespace, consumed; -1 at the end of the text. */
static inline int take(Parser *ps) {
    int c = peek(ps);
    if (c >= 0) ps->p++;
    return c;
}

static inline int expect(Parser *ps, unsigned char c) {
    if (peek(ps) != c) return NOT_FAST;
    ps->p++;
    return OK;
}

static int hex4(Ptr s, Ptr end, unsigned *out) {
    if (end - s < 4) return NOT_FAST;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return NOT_FAST;
        v = v * 16 + d;
    }
    *out = v;
    return OK;
}

/* One escape (p at the backslash): JSON's, with \u surrogates in pairs. */
static int escape(Parser *ps) {
    Ptr s = ps->p + 1;
    if (s >= ps->end) return NOT_FAST;
    if (strchr("\"\\/bfnrt", *s) != NULL && *s != '\0') {
        ps->p = s + 1;
        return OK;
    }
    unsigned unit, low;
    if (*s != 'u' || hex4(s + 1, ps->end, &unit) != OK) return NOT_FAST;
    s += 5;
    if (unit >= 0xDC00 && unit <= 0xDFFF) return NOT_FAST; /* a low surrogate first */
    if (unit >= 0xD800 && unit <= 0xDBFF) {
        if (ps->end - s < 2 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, ps->end, &low) != OK)
            return NOT_FAST;
        if (low < 0xDC00 || low > 0xDFFF) return NOT_FAST;
        s += 6;
    }
    ps->p = s;
    return OK;
}

/* One UTF-8 sequence of two or more bytes (p at its first byte), as RFC 3629 allows them: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_sequence(Parser *ps) {
    Ptr s = ps->p;
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int more;
    if (c >= 0xC2 && c <= 0xDF) more = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        more = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        more = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return NOT_FAST;
    if (ps->end - s <= more) return NOT_FAST;
    if (s[1] < lo || s[1] > hi) return NOT_FAST;
    for (int i = 2; i <= more; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return NOT_FAST;
    ps->p = s + more + 1;
    return OK;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline int is_plain(unsigned c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/* The first byte at or after `s` that ends a plain run of a string: a quote, a backslash, a
 * control character or a byte of a multi-byte UTF-8 sequence; `end` if none does. Eight bytes
 * at a time where words load little-endian: in a word x, (x - ONES) & ~x & HIGHS marks zero
 * bytes and (x - n * ONES) & ~x & HIGHS bytes below n (n <= 0x80), exactly up to the first
 * one marked, which is the one wanted. */
static inline Ptr plain_run(Ptr s, Ptr end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - s >= 8) {
        uint64_t x;
        memcpy(&x, s, 8);
        uint64_t quote = x ^ ('"' * ONES), backslash = x ^ ('\\' * ONES);
        uint64_t stop = (((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) |
                         ((x - 0x20 * ONES) & ~x) | x) &
                        HIGHS;
        if (stop) return s + (__builtin_ctzll(stop) >> 3);
        s += 8;
    }
#endif
    while (s < end && is_plain(*s)) s++;
    return s;
}

/* A string (p at its opening quote): `content` and `len` tell what lies between the quotes, as
 * written; *escaped whether it has escapes. Checks UTF-8, escapes and control characters. */
static int scan_string(Parser *ps, Ptr *content, size_t *len, int *escaped) {
    Ptr start = ++ps->p;
    *escaped = 0;
    for (;;) {
        ps->p = plain_run(ps->p, ps->end);
        if (ps->p >= ps->end) return NOT_FAST;
        unsigned c = *ps->p;
        if (c == '"') break;
        if (c == '\\') {
            *escaped = 1;
            RETURN_IF(escape(ps));
        } else if (c < 0x20) {
            return NOT_FAST;
        } else {
            RETURN_IF(utf8_sequence(ps));
        }
    }
    *content = start;
    *len = (size_t)(ps->p - start);
    ps->p++;
    return OK;
}

typedef struct {
    Ptr start;
    size_t len;
    int is_int;   /* no fraction, no exponent */
    int digits;   /* of the integer part */
    long exp;     /* the exponent's value, capped */
} Number;

static inline int is_digit(int c) { return c >= '0' && c <= '9'; }

/* A number as JSON writes them: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(Parser *ps, Number *n) {
    Ptr s = ps->p, end = ps->end;
    n->start = s;
    n->is_int = 1;
    n->exp = 0;
    if (s < end && *s == '-') s++;
    if (s >= end || !is_digit(*s)) return NOT_FAST;
    Ptr digits = s;
    if (*s == '0') s++;
    else
        while (s < end && is_digit(*s)) s++;
    n->digits = (int)(s - digits < 1000 ? s - digits : 1000);
    if (s < end && *s == '.') {
        n->is_int = 0;
        if (++s >= end || !is_digit(*s)) return NOT_FAST;
        while (s < end && is_digit(*s)) s++;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        n->is_int = 0;
        int negative = 0;
        if (++s < end && (*s == '+' || *s == '-')) negative = *s++ == '-';
        if (s >= end || !is_digit(*s)) return NOT_FAST;
        for (; s < end && is_digit(*s); s++)
            if (n->exp < 100000) n->exp = n->exp * 10 + (*s - '0');
        if (negative) n->exp = -n->exp;
    }
    n->len = (size_t)(s - n->start);
    ps->p = s;
    return OK;
}

/* Whether a number surely converts to a finite float64 away from underflow: what msgspec
 * decodes without complaint (it refuses numbers out of float64's range). Integers always do. */
static int number_in_range(const Number *n) {
    return n->is_int || (n->digits + n->exp < 300 && n->digits + n->exp > -300);
}

/* The integer literal `n` as int64; NOT_FAST for fractions, exponents and values out of range. */
static int to_int64(const Number *n, int64_t *out) {
    if (!n->is_int) return NOT_FAST;
    Ptr s = n->start, end = n->start + n->len;
    int negative = *s == '-';
    if (negative) s++;
    uint64_t v = 0;
    for (; s < end; s++) {
        if (v > (UINT64_MAX - 9) / 10) return NOT_FAST;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (negative ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return NOT_FAST;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return OK;
}

static const double POWERS_OF_TEN[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The number `n` as the nearest float64, as msgspec converts it (an integer through its exact
 * value, so "-0" is +0.0). A mantissa of at most 2^53 (so exact in a double; up to 16 digits)
 * times a power of ten within 1e22 are exact operands of one correctly rounded operation
 * (Clinger's fast path); other numbers go through Python's correctly rounded strtod. NOT_FAST for
 * numbers that do not fit a finite double. */
static int to_double(const Number *n, double *out) {
    Ptr s = n->start, end = n->start + n->len;
    int negative = *s == '-', after_point = 0, significant = 0;
    uint64_t mantissa = 0;
    long fraction = 0; /* digits taken after the point */
    if (negative) s++;
    for (; s < end && *s != 'e' && *s != 'E' && significant < 19; s++) {
        if (*s == '.') {
            after_point = 1;
            continue;
        }
        if (mantissa != 0 || *s != '0') {
            mantissa = mantissa * 10 + (uint64_t)(*s - '0'); /* < 10^19: no overflow */
            significant++;
        }
        fraction += after_point;
    }
    int taken_all = s == end || *s == 'e' || *s == 'E';
    long exp10 = n->exp - fraction;
    if (taken_all && mantissa <= (1ULL << 53) &&
        (mantissa == 0 || (exp10 >= -22 && exp10 <= 22))) {
        double v = exp10 < 0 ? (double)mantissa / POWERS_OF_TEN[mantissa ? -exp10 : 0]
                             : (double)mantissa * POWERS_OF_TEN[mantissa ? exp10 : 0];
        *out = negative && !(n->is_int && v == 0.0) ? -v : v;
        return OK;
    }
    char text[400];
    if (n->len >= sizeof(text)) return NOT_FAST;
    memcpy(text, n->start, n->len);
    text[n->len] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(text, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NOT_FAST;
    }
    if (stop != text + n->len || !isfinite(v)) return NOT_FAST;
    *out = n->is_int && v == 0.0 ? 0.0 : v;
    return OK;
}

/* -- values validated and skipped (`value_to` copies those that are kept) --------------------- */

static int literal(Parser *ps, const char *word) {
    size_t len = strlen(word);
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0) return NOT_FAST;
    ps->p += len;
    return OK;
}

static int value(Parser *ps, int depth);

static int skip_string(Parser *ps) {
    Ptr content;
    size_t len;
    int escaped;
    return scan_string(ps, &content, &len, &escaped);
}

static int skip_number(Parser *ps) {
    Number n;
    RETURN_IF(scan_number(ps, &n));
    return number_in_range(&n) ? OK : NOT_FAST;
}

/* An object or array (p at its bracket); `depth` is the level it opens. */
static int container(Parser *ps, int depth) {
    unsigned char open = *ps->p, close = open == '{' ? '}' : ']';
    int object = open == '{';
    if (depth > ps->max_depth) return NOT_FAST;
    ps->p++;
    if (peek(ps) == close) {
        ps->p++;
        return OK;
    }
    for (;;) {
        if (object) {
            if (peek(ps) != '"') return NOT_FAST;
            RETURN_IF(skip_string(ps));
            RETURN_IF(expect(ps, ':'));
        }
        RETURN_IF(value(ps, depth + 1));
        int c = take(ps);
        if (c == close) return OK;
        if (c != ',') return NOT_FAST;
    }
}

/* Any JSON value; `depth` is the level a container opens. */
static int value(Parser *ps, int depth) {
    switch (peek(ps)) {
        case '"': return skip_string(ps);
        case '{':
        case '[': return container(ps, depth);
        case 't': return literal(ps, "true");
        case 'f': return literal(ps, "false");
        case 'n': return literal(ps, "null");
        default: return skip_number(ps);
    }
}

/* -- values copied compactly into room reserved beforehand (`args_value`) --------------------- */

static int value_to(Parser *ps, char **out, int depth);

static int literal_to(Parser *ps, const char *word, size_t len, char **out) {
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0) return NOT_FAST;
    copy_bytes(*out, ps->p, len);
    *out += len;
    ps->p += len;
    return OK;
}

/* An object or array (p at its bracket); `depth` is the level it opens. */
static int container_to(Parser *ps, char **out, int depth) {
    unsigned char open = *ps->p, close = open == '{' ? '}' : ']';
    int object = open == '{';
    if (depth > ps->max_depth) return NOT_FAST;
    ps->p++;
    *(*out)++ = (char)open;
    if (peek(ps) == close) {
        ps->p++;
        *(*out)++ = (char)close;
        return OK;
    }
    for (;;) {
        if (object) {
            if (peek(ps) != '"') return NOT_FAST;
            RETURN_IF(value_to(ps, out, depth + 1));
            RETURN_IF(expect(ps, ':'));
            *(*out)++ = ':';
        }
        skip_space(ps);
        Ptr at = ps->p;
        if (ps->end - at >= 2 && is_digit(at[0]) && (at[1] == ',' || at[1] == close)) {
            /* a one-digit integer and what follows it (shapes, strides): no call, no scan */
            *(*out)++ = (char)at[0];
            *(*out)++ = (char)at[1];
            ps->p += 2;
            if (at[1] == close) return OK;
            continue;
        }
        RETURN_IF(value_to(ps, out, depth + 1));
        int c = take(ps);
        if (c == close) {
            *(*out)++ = (char)close;
            return OK;
        }
        if (c != ',') return NOT_FAST;
        *(*out)++ = ',';
    }
}

/* Any JSON value (p at its first byte: the callers have skipped the whitespace before it),
 * checked as `value` checks it and copied compactly (whitespace between tokens dropped) to
 * *out (with room for it); `depth` as `value`'s. */
static int value_to(Parser *ps, char **out, int depth) {
    Ptr start;
    switch (ps->p < ps->end ? *ps->p : -1) {
        case '"': {
            Ptr content;
            size_t len;
            int escaped;
            start = ps->p;
            RETURN_IF(scan_string(ps, &content, &len, &escaped));
            break;
        }
        case '{':
        case '[': return container_to(ps, out, depth);
        case 't': return literal_to(ps, "true", 4, out);
        case 'f': return literal_to(ps, "false", 5, out);
        case 'n': return literal_to(ps, "null", 4, out);
        default: {
            start = ps->p;
            if (ps->end - start >= 2 && is_digit(start[0]) && !is_digit(start[1]) &&
                start[1] != '.' && (start[1] | 0x20) != 'e') {
                *(*out)++ = (char)start[0]; /* a one-digit integer (shapes, strides, ids) */
                ps->p++;
                return OK;
            }
            Number n;
            RETURN_IF(scan_number(ps, &n));
            if (!number_in_range(&n)) return NOT_FAST;
        }
    }
    copy_bytes(*out, start, (size_t)(ps->p - start));
    *out += ps->p - start;
    return OK;
}

/* A code point's UTF-8 bytes (not a surrogate: scan_string refuses lone ones). */
static int put_utf8(Buf *out, uint32_t cp) {
    unsigned char bytes[4];
    size_t n;
    if (cp < 0x80) {
        bytes[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        bytes[0] = (unsigned char)(0xC0 | cp >> 6);
        bytes[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        bytes[0] = (unsigned char)(0xE0 | cp >> 12);
        bytes[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        bytes[0] = (unsigned char)(0xF0 | cp >> 18);
        bytes[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        bytes[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        bytes[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buf_put(out, bytes, n);
}

/* The UTF-8 text of a string's content `s` (as written; scan_string checked its escapes),
 * appended to `out`. */
static int unescape(Ptr s, size_t len, Buf *out) {
    Ptr end = s + len;
    while (s < end) {
        Ptr run = s;
        while (s < end && *s != '\\') s++;
        RETURN_IF(buf_put(out, run, (size_t)(s - run)));
        if (end - s < 2) break;
        unsigned unit, low;
        switch (s[1]) {
            case 'b': unit = '\b'; break;
            case 'f': unit = '\f'; break;
            case 'n': unit = '\n'; break;
            case 'r': unit = '\r'; break;
            case 't': unit = '\t'; break;
            case 'u':
                if (hex4(s + 2, end, &unit) != OK) return NOT_FAST;
                if (unit >= 0xD800 && unit <= 0xDBFF) { /* the pair's low half follows */
                    if (hex4(s + 8, end, &low) != OK) return NOT_FAST;
                    RETURN_IF(put_utf8(out, 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)));
                    s += 12;
                } else {
                    RETURN_IF(put_utf8(out, unit));
                    s += 6;
                }
                continue;
            default: unit = s[1]; /* a quote, a backslash or a slash */
        }
        RETURN_IF(buf_byte(out, (unsigned char)unit));
        s += 2;
    }
    return OK;
}

/* -- distinct strings (names, categories) by their text -------------------------------------- */

typedef struct {
    Ptr text;  /* into the batch's text, or `own` */
    size_t len;
    uint64_t hash;
    char *own; /* the decoded text of a string written with escapes, NULL for the others */
} Label;

typedef struct {
    Label *labels; /* in order of first use: code i is labels[i] */
    int32_t *slots; /* open addressing: label index + 1, 0 empty; n_slots a power of two */
    size_t n, cap, n_slots;
} Labels;

/* A hash of a string's bytes, a word at a time. */
static uint64_t hash_of(Ptr s, size_t len) {
    uint64_t h = len * 0x9E3779B97F4A7C15ULL, w;
    for (; len >= 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int labels_grow(Labels *t) {
    size_t n_slots = t->n_slots ? t->n_slots * 2 : 256;
    int32_t *slots = PyMem_Calloc(n_slots, sizeof(int32_t));
    Label *labels = PyMem_Realloc(t->labels, n_slots / 2 * sizeof(Label));
    if (slots == NULL || labels == NULL) {
        PyMem_Free(slots);
        if (labels != NULL) t->labels = labels;
        PyErr_NoMemory();
        return FAILED;
    }
    for (size_t i = 0; i < t->n; i++) {
        size_t j = labels[i].hash & (n_slots - 1);
        while (slots[j]) j = (j + 1) & (n_slots - 1);
        slots[j] = (int32_t)i + 1;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->labels = labels;
    t->n_slots = n_slots;
    t->cap = n_slots / 2;
    return OK;
}

/* The code of the string whose UTF-8 bytes are `text`, added if new (a copy of `text` kept
 * where `copy` is set: it does not outlive the call). */
static int label_code(Labels *t, Ptr text, size_t len, int copy, int32_t *code) {
    if (t->n + 1 > t->cap) {
        if (t->n >= INT32_MAX / 4) return NOT_FAST;
        RETURN_IF(labels_grow(t));
    }
    uint64_t h = hash_of(text, len);
    size_t j = h & (t->n_slots - 1);
    for (; t->slots[j]; j = (j + 1) & (t->n_slots - 1)) {
        Label *l = &t->labels[t->slots[j] - 1];
        if (l->hash == h && l->len == len && memcmp(l->text, text, len) == 0) {
            *code = t->slots[j] - 1;
            return OK;
        }
    }
    char *own = NULL;
    if (copy) {
        own = PyMem_Malloc(len ? len : 1);
        if (own == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        if (len) memcpy(own, text, len);
        text = (Ptr)own;
    }
    t->labels[t->n] = (Label){text, len, h, own};
    t->slots[j] = (int32_t)++t->n;
    *code = (int32_t)(t->n - 1);
    return OK;
}

static PyObject *labels_list(const Labels *t) {
    PyObject *list = PyList_New((Py_ssize_t)t->n);
    for (size_t i = 0; list != NULL && i < t->n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)t->labels[i].text,
                                           (Py_ssize_t)t->labels[i].len, NULL);
        if (s == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

/* -- events -------------------------------------------------------------------------------- */

enum { PH, NAME, CAT, TS, DUR, PID, TID, S, ID, BP, ARGS, RECFN_ID, RECFN_PARENT_ID, N_FIELDS };

static inline int is_key(Ptr key, size_t len, const char *name) {
    return strlen(name) == len && memcmp(key, name, len) == 0;
}

/* The Event field a key names (as written), -1 for others. */
static int field_of(Ptr key, size_t len) {
    if (len == 0) return -1;
    switch (key[0]) {
        case 'p': return is_key(key, len, "ph") ? PH : is_key(key, len, "pid") ? PID : -1;
        case 'n': return is_key(key, len, "name") ? NAME : -1;
        case 'c': return is_key(key, len, "cat") ? CAT : -1;
        case 't': return is_key(key, len, "ts") ? TS : is_key(key, len, "tid") ? TID : -1;
        case 'd': return is_key(key, len, "dur") ? DUR : -1;
        case 'a': return is_key(key, len, "args") ? ARGS : -1;
        case 's': return is_key(key, len, "s") ? S : -1;
        case 'i': return is_key(key, len, "id") ? ID : -1;
        case 'b': return is_key(key, len, "bp") ? BP : -1;
        case 'r':
            return is_key(key, len, "recfn_id")          ? RECFN_ID
                   : is_key(key, len, "recfn_parent_id") ? RECFN_PARENT_ID
                                                         : -1;
        default: return -1;
    }
}

#define UNKNOWN (-2)
#define PLAIN_KEY(text, result)                                   \
    if (memcmp(s, text "\"", sizeof(text)) == 0) {               \
        ps->p = s + sizeof(text);                                 \
        return result;                                            \
    }

/* The Event field whose key (p at its quote) is spelled as torch and recfn write it, read
 * without scanning the string (p then after its closing quote); UNKNOWN for any other key. */
static inline int known_field(Parser *ps) {
    Ptr s = ps->p + 1;
    if (ps->end - s < 8) return UNKNOWN;
    switch (*s) {
        case 'p': PLAIN_KEY("ph", PH) PLAIN_KEY("pid", PID) break;
        case 'n': PLAIN_KEY("name", NAME) break;
        case 'c': PLAIN_KEY("cat", CAT) break;
        case 't': PLAIN_KEY("ts", TS) PLAIN_KEY("tid", TID) break;
        case 'd': PLAIN_KEY("dur", DUR) break;
        case 'a': PLAIN_KEY("args", ARGS) break;
        default: break;
    }
    return UNKNOWN;
}

/* A field's value as far as the columns need it. */
typedef enum { ABSENT, IS_NULL, IS_STRING, IS_NUMBER, IS_OTHER } Kind;

typedef struct {
    Kind kind;
    Ptr text; /* a string's content, as written */
    size_t len;
    int escaped;
    int32_t code; /* a label's code where a repeat told it (`repeat_of`), else -1 */
    Number number;
} Token;

/* The last plain string a field (ph, name, cat) had, and its label's code (-1: none yet). */
typedef struct {
    Ptr text;
    size_t len;
    int32_t code;
} Last;

/* Whether the string at p (after whitespace) is the same text as `last` (a plain string
 * checked before, so this one needs no scan): then `t` is it, and p after it. */
static inline int repeat_of(Parser *ps, const Last *last, Token *t) {
    if (last->text == NULL || peek(ps) != '"') return 0;
    Ptr s = ps->p + 1;
    if ((size_t)(ps->end - s) <= last->len || s[last->len] != '"' ||
        memcmp(s, last->text, last->len) != 0)
        return 0;
    *t = (Token){.kind = IS_STRING, .text = s, .len = last->len, .escaped = 0, .code = last->code};
    ps->p = s + last->len + 1;
    return 1;
}

static int token(Parser *ps, Token *t, int depth) {
    switch (peek(ps)) {
        case '"':
            t->kind = IS_STRING;
            t->code = -1;
            return scan_string(ps, &t->text, &t->len, &t->escaped);
        case 'n':
            t->kind = IS_NULL;
            return literal(ps, "null");
        case '-':
        case '0': case '1': case '2': case '3': case '4':
        case '5': case '6': case '7': case '8': case '9':
            t->kind = IS_NUMBER;
            RETURN_IF(scan_number(ps, &t->number));
            return number_in_range(&t->number) ? OK : NOT_FAST;
        default:
            t->kind = IS_OTHER;
            return value(ps, depth);
    }
}

/* A list column of the complete events (Arrow's list<list<int64>> or list<string>): per event
 * an offset into the items and a validity byte; per item (a list of ints, a string) an offset
 * into the values and a validity byte; the values (int64 with validity bytes, or UTF-8 bytes). */
typedef struct {
    Buf lists_at, lists_valid, items_at, items_valid, values, values_valid;
    size_t n_items, n_values;
} ListColumn;

enum { SEQUENCE_NR, FWD_THREAD_ID, INPUT_DIMS, INPUT_TYPE }; /* torch's args, by key */

/* The torch args of one event: its integers, and where its list values lie in the args text. */
typedef struct {
    int64_t ints[2];
    size_t at[2], len[2]; /* len 0: absent */
    int twice;            /* a list key occurs twice */
} TorchArgs;

/* Columns of one batch's complete events, flows and memory instants, and the others' texts. */
typedef struct {
    Buf ts, dur, pid, tid, ids[2], has_id[2], torch[2], names, cats, has_args, args_at, args;
    Buf col_ts, col_pid, col_tid, col_names, col_cats, col_ph, col_at, col_args_at, col_args,
        col_bytes, col_type, col_id;
    Buf others;
    Buf scratch; /* a name's decoded text */
    Labels name_labels, cat_labels;
    Labels col_labels[2]; /* their names and cats: the complete events' tables stay theirs */
    Labels id_labels[2];   /* string pids, tids of complete events (torch's "Spans") */
    Buf id_text_at[2], id_text_codes[2]; /* where they are, their codes into id_labels */
    Last last[CAT + 1]; /* by field: ph, name, cat */
    ListColumn lists[2]; /* input_shapes, input_dtypes */
    size_t n, n_others, n_columnar;
    size_t n_later; /* events that are not complete so far: others and columnar ones */
    int any_id[2];
    int lists_ok;   /* every complete event's list values so far are of the simple form */
    int lists_seen; /* a complete event had "Input Dims" or "Input type": the lists are kept */
    int others_large; /* another event's ts or dur may be a float that lost nanoseconds */
    int64_t torch_default[2];
} Batch;

#define LENGTH(array) (sizeof(array) / sizeof((array)[0]))
#define N_NAMED_BUFS 33 /* batch_bufs's `bufs` */
#define N_LIST_BUFS 6   /* batch_bufs's `parts`, of each list column */
#define N_BUFS (N_NAMED_BUFS + LENGTH(((Batch *)0)->lists) * N_LIST_BUFS)

/* The batch's buffers (`N_BUFS` of them: the compiler checks the counts). */
static void batch_bufs(Batch *b, Buf **out) {
    Buf *bufs[] = {&b->ts,         &b->dur,          &b->pid,         &b->tid,
                   &b->ids[0],     &b->ids[1],       &b->has_id[0],   &b->has_id[1],
                   &b->torch[0],   &b->torch[1],     &b->names,       &b->cats,
                   &b->has_args,   &b->args_at,      &b->args,        &b->others,
                   &b->scratch,    &b->col_ts,      &b->col_pid,    &b->col_tid,
                   &b->col_names, &b->col_cats,    &b->col_ph,     &b->col_at,
                   &b->col_args_at, &b->col_args,  &b->id_text_at[0], &b->id_text_at[1],
                   &b->id_text_codes[0], &b->id_text_codes[1], &b->col_bytes, &b->col_type,
                   &b->col_id};
    _Static_assert(LENGTH(bufs) == N_NAMED_BUFS, "N_NAMED_BUFS must count `bufs`");
    size_t n = 0;
    for (size_t i = 0; i < LENGTH(bufs); i++) out[n++] = bufs[i];
    for (size_t i = 0; i < LENGTH(b->lists); i++) {
        ListColumn *c = &b->lists[i];
        Buf *parts[] = {&c->lists_at, &c->items_at, &c->lists_valid,
                        &c->items_valid, &c->values, &c->values_valid};
        _Static_assert(LENGTH(parts) == N_LIST_BUFS, "N_LIST_BUFS must count `parts`");
        for (size_t j = 0; j < LENGTH(parts); j++) out[n++] = parts[j];
    }
}

/* The last batch's buffers, emptied, for the next batch: a trace's batches are alike, so
 * their memory is reused rather than allocated (and paged in) again for each one. A read frees
 * them when it ends (`release`). */
static Buf spare[N_BUFS];
#define SPARE_CAP ((size_t)64 << 20) /* larger buffers are not kept */

static void spare_free(void) {
    for (size_t i = 0; i < N_BUFS; i++) {
        PyMem_Free(spare[i].data);
        spare[i] = (Buf){NULL, 0, 0};
    }
}

static void batch_reuse(Batch *b) {
    Buf *bufs[N_BUFS];
    batch_bufs(b, bufs);
    for (size_t i = 0; i < N_BUFS; i++) {
        *bufs[i] = spare[i];
        bufs[i]->len = 0;
        spare[i] = (Buf){NULL, 0, 0};
    }
}

static void batch_free(Batch *b) {
    Buf *bufs[N_BUFS];
    batch_bufs(b, bufs);
    spare_free();
    for (size_t i = 0; i < N_BUFS; i++) {
        if (bufs[i]->cap <= SPARE_CAP) spare[i] = *bufs[i];
        else PyMem_Free(bufs[i]->data);
    }
    Labels *tables[] = {&b->name_labels,    &b->cat_labels,   &b->col_labels[0],
                        &b->col_labels[1], &b->id_labels[0], &b->id_labels[1]};
    for (size_t i = 0; i < LENGTH(tables); i++) {
        for (size_t j = 0; j < tables[i]->n; j++) PyMem_Free(tables[i]->labels[j].own);
        PyMem_Free(tables[i]->labels);
        PyMem_Free(tables[i]->slots);
    }
}

/* The torch arg a key names (as written), -1 for others. */
static int torch_key(Ptr key, size_t len) {
    switch (len) {
        case 15: return memcmp(key, "Sequence number", 15) == 0 ? SEQUENCE_NR : -1;
        case 13: return memcmp(key, "Fwd thread id", 13) == 0 ? FWD_THREAD_ID : -1;
        case 10:
            return memcmp(key, "Input Dims", 10) == 0   ? INPUT_DIMS
                   : memcmp(key, "Input type", 10) == 0 ? INPUT_TYPE
                                                        : -1;
        default: return -1;
    }
}

/* The torch arg (`torch_key`) whose key (p at its quote) is one of the keys torch writes on
 * every op, spelled plainly, read without scanning the string (p then after its closing
 * quote); UNKNOWN for any other key. */
static inline int known_arg(Parser *ps) {
    Ptr s = ps->p + 1;
    if (ps->end - s < 24) return UNKNOWN;
    switch (*s) {
        case 'E': PLAIN_KEY("External id", -1) PLAIN_KEY("Ev Idx", -1) break;
        case 'R': PLAIN_KEY("Record function id", -1) break;
        case 'S': PLAIN_KEY("Sequence number", SEQUENCE_NR) break;
        case 'F': PLAIN_KEY("Fwd thread id", FWD_THREAD_ID) break;
        case 'C': PLAIN_KEY("Concrete Inputs", -1) break;
        case 'I':
            PLAIN_KEY("Input Dims", INPUT_DIMS)
            PLAIN_KEY("Input type", INPUT_TYPE)
            PLAIN_KEY("Input Strides", -1)
            break;
        default: break;
    }
    return UNKNOWN;
}

/* An event's args (p at the value), copied compactly to *out (`data`: the args text, where
 * `t->at` counts from); torch's integer args, when the value is an object, to t->ints (their
 * defaults when absent or null), and where its list args' compact text lies to t->at and
 * t->len. */
static int args_to(Parser *ps, char *data, char **out, TorchArgs *t) {
    if (peek(ps) != '{') return value_to(ps, out, 3);
    if (3 > ps->max_depth) return NOT_FAST;
    ps->p++;
    *(*out)++ = '{';
    if (peek(ps) == '}') {
        ps->p++;
        *(*out)++ = '}';
        return OK;
    }
    int seen[2] = {0, 0};
    for (;;) {
        Ptr key;
        size_t len;
        int escaped;
        if (peek(ps) != '"') return NOT_FAST;
        Ptr quoted = ps->p;
        int which = known_arg(ps);
        if (which == UNKNOWN) {
            RETURN_IF(scan_string(ps, &key, &len, &escaped));
            if (escaped) return NOT_FAST; /* it could spell a torch key */
            which = torch_key(key, len);
        }
        copy_bytes(*out, quoted, (size_t)(ps->p - quoted));
        *out += ps->p - quoted;
        RETURN_IF(expect(ps, ':'));
        *(*out)++ = ':';
        skip_space(ps);
        if (which == SEQUENCE_NR || which == FWD_THREAD_ID) {
            Token v;
            if (seen[which]++) return NOT_FAST;
            Ptr at = ps->p;
            RETURN_IF(token(ps, &v, 4));
            if (v.kind == IS_NUMBER) RETURN_IF(to_int64(&v.number, &t->ints[which]));
            else if (v.kind != IS_NULL) return NOT_FAST;
            copy_bytes(*out, at, (size_t)(ps->p - at));
            *out += ps->p - at;
        } else if (which >= 0) {
            int list = which - INPUT_DIMS;
            t->twice |= t->len[list] != 0;
            t->at[list] = (size_t)(*out - data);
            RETURN_IF(value_to(ps, out, 4));
            t->len[list] = (size_t)(*out - data) - t->at[list];
        } else {
            RETURN_IF(value_to(ps, out, 4));
        }
        int c = take(ps);
        if (c == '}') {
            *(*out)++ = '}';
            return OK;
        }
        if (c != ',') return NOT_FAST;
        *(*out)++ = ',';
    }
}

/* `args_to` appending to the batch's args text: the compact text is no longer than the text it
 * comes from, so room for the rest of the text is reserved once, and keys, values and
 * separators are written unchecked. */
static int args_value(Parser *ps, Batch *b, TorchArgs *t) {
    RETURN_IF(buf_reserve(&b->args, (size_t)(ps->end - ps->p)));
    char *at = b->args.data + b->args.len;
    int rc = args_to(ps, b->args.data, &at, t);
    b->args.len = (size_t)(at - b->args.data);
    return rc;
}

static int put_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }
static int put_i32(Buf *b, int32_t v) { return buf_put(b, &v, sizeof v); }

static const uint64_t POWERS_OF_TEN_U64[] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL,
    1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
    1000000000000ULL, 10000000000000ULL, 100000000000000ULL, 1000000000000000ULL,
    10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
    10000000000000000000ULL};

/* The microseconds `n` times 1000 from its digits, rounded half to even: NOT_FAST for more than
 * 19 significant digits and for results outside (INT64_MIN + 1, INT64_MAX], which
 * recfn.formats.chrome._times reads from the same text. */
static NOINLINE int exact_ns(const Number *n, int64_t *out) {
    Ptr s = n->start, end = n->start + n->len;
    int negative = *s == '-', after_point = 0, significant = 0;
    uint64_t mantissa = 0;
    long fraction = 0;
    if (negative) s++;
    for (; s < end && *s != 'e' && *s != 'E'; s++) {
        if (*s == '.') {
            after_point = 1;
            continue;
        }
        if (mantissa != 0 || *s != '0') {
            if (++significant > 19) return NOT_FAST;
            mantissa = mantissa * 10 + (uint64_t)(*s - '0');
        }
        fraction += after_point;
    }
    long exp10 = n->exp - fraction + 3; /* nanoseconds = mantissa * 10^exp10 */
    uint64_t v = 0;
    if (mantissa == 0) {
        v = 0;
    } else if (exp10 >= 0) {
        if (exp10 > 18 || mantissa > UINT64_MAX / POWERS_OF_TEN_U64[exp10]) return NOT_FAST;
        v = mantissa * POWERS_OF_TEN_U64[exp10];
    } else if (exp10 >= -19) {
        uint64_t unit = POWERS_OF_TEN_U64[-exp10], rest = mantissa % unit;
        v = mantissa / unit;
        if (rest > unit - rest || (rest == unit - rest && (v & 1))) v++;
    } /* else below a tenth of a nanosecond: 0 */
    if (v > (uint64_t)INT64_MAX - (uint64_t)negative) return NOT_FAST;
    *out = negative ? -(int64_t)v : (int64_t)v;
    return OK;
}

/* A time written as torch and Chrome write them, at most 15 digits before the point and 3 after
 * it (a whole number of nanoseconds, no exponent), as int64 nanoseconds straight from its
 * digits: the value `to_ns` gives such a number either way (exact for whole nanoseconds), without
 * a double. 0 for other numbers. */
static inline int whole_ns(const Number *n, int64_t *out) {
    Ptr s = n->start, end = n->start + n->len;
    int negative = *s == '-', fraction = 0;
    if (n->digits > 15) return 0;
    s += negative;
    int64_t v = 0;
    for (; s < end && *s != '.'; s++) {
        if (!is_digit(*s)) return 0;
        v = v * 10 + (*s - '0');
    }
    if (s < end) {
        for (s++; s < end && fraction < 3; s++, fraction++) {
            if (!is_digit(*s)) return 0;
            v = v * 10 + (*s - '0');
        }
        if (s < end) return 0;
    }
    for (; fraction < 3; fraction++) v *= 10;
    *out = negative ? -v : v;
    return 1;
}

/* A Chrome time (microseconds) as int64 nanoseconds, as recfn.formats.chrome._times computes it
 * from the same text: below CHROME_EXACT_US in magnitude from its nearest double f,
 * floor(f) * 1000 + rint((f - floor(f)) * 1000), which is exact for every whole number of
 * nanoseconds; from there on, where a double no longer tells nanoseconds apart, from its digits
 * (`exact_ns`). */
static int to_ns(const Number *n, int64_t *out) {
    if (whole_ns(n, out)) return OK;
    double f;
    RETURN_IF(to_double(n, &f));
    if (fabs(f) >= (double)CHROME_EXACT_US) return exact_ns(n, out);
    double whole = floor(f);
    *out = (int64_t)whole * 1000 + (int64_t)rint((f - whole) * 1000.0);
    return OK;
}

static int time_column(Buf *column, const Token *t) {
    int64_t v = INT64_MIN;
    if (t->kind == IS_NUMBER) RETURN_IF(to_ns(&t->number, &v));
    else if (t->kind != ABSENT && t->kind != IS_NULL) return NOT_FAST;
    return put_i64(column, v);
}

static int label_column(Buf *column, Labels *labels, const Token *t, Buf *scratch, Last *last) {
    int32_t code = -1;
    if (t->kind == IS_STRING && !t->escaped) {
        if (t->code >= 0) code = t->code;
        else RETURN_IF(label_code(labels, t->text, t->len, 0, &code));
        *last = (Last){t->text, t->len, code};
    } else if (t->kind == IS_STRING) {
        scratch->len = 0;
        RETURN_IF(unescape(t->text, t->len, scratch));
        RETURN_IF(label_code(labels, (Ptr)scratch->data, scratch->len, 1, &code));
    } else if (t->kind != ABSENT && t->kind != IS_NULL) {
        return NOT_FAST;
    }
    return put_i32(column, code);
}

static int id_column(Buf *column, const Token *t) {
    int64_t v;
    if (t->kind != IS_NUMBER) return NOT_FAST;
    RETURN_IF(to_int64(&t->number, &v));
    return put_i64(column, v);
}

/* A complete event's pid (k 0) or tid (k 1): an int64 integer, or a string (torch writes its
 * profiler's own span with pid "Spans"), kept apart as text with its position; 0 in the column. */
static int process_id_column(Batch *b, int k, const Token *t) {
    Buf *column = k == 0 ? &b->pid : &b->tid;
    if (t->kind != IS_STRING) return id_column(column, t);
    Token text = *t;
    text.code = -1; /* a repeat's code (`repeat_of`) is a name's or a category's */
    Last unused;
    RETURN_IF(label_column(&b->id_text_codes[k], &b->id_labels[k], &text, &b->scratch, &unused));
    RETURN_IF(put_i64(&b->id_text_at[k], (int64_t)b->n));
    return put_i64(column, 0);
}

static int optional_id_column(Batch *b, int k, const Token *t) {
    int64_t v = 0;
    if (t->kind == IS_NUMBER) RETURN_IF(to_int64(&t->number, &v));
    else if (t->kind != ABSENT && t->kind != IS_NULL) return NOT_FAST;
    b->any_id[k] |= t->kind == IS_NUMBER;
    RETURN_IF(buf_byte(&b->has_id[k], t->kind == IS_NUMBER));
    return put_i64(&b->ids[k], v);
}

/* The end of an item of `c`: its values' end offset and its validity. NOT_FAST where int32
 * offsets cannot count the values. */
static int end_item(ListColumn *c, int valid) {
    if (c->n_values > INT32_MAX) return NOT_FAST;
    RETURN_IF(put_i32(&c->items_at, (int32_t)c->n_values));
    RETURN_IF(buf_byte(&c->items_valid, (unsigned char)valid));
    c->n_items++;
    return OK;
}

/* The list columns read the compact args text, which `value_to` checked and stripped of
 * whitespace: the next byte is the next token's (-1 at the end). */
static inline int next_byte(const Parser *ps) { return ps->p < ps->end ? *ps->p : -1; }

static inline int take_byte(Parser *ps) { return ps->p < ps->end ? *ps->p++ : -1; }

/* An item of "Input Dims": null, or a list of int64 integers and nulls; NOT_FAST for others. */
static int dims_item(Parser *ps, ListColumn *c) {
    if (next_byte(ps) != '[') {
        RETURN_IF(literal(ps, "null"));
        return end_item(c, 0);
    }
    ps->p++;
    if (next_byte(ps) == ']') ps->p++;
    else
        for (;;) {
            int64_t v = 0;
            int present = next_byte(ps) != 'n';
            if (present && ps->end - ps->p >= 2 && is_digit(ps->p[0]) &&
                (ps->p[1] == ',' || ps->p[1] == ']')) {
                v = ps->p[0] - '0'; /* a one-digit size (the compact text has no spaces) */
                ps->p++;
            } else if (present) {
                Number n;
                RETURN_IF(scan_number(ps, &n));
                RETURN_IF(to_int64(&n, &v));
            } else {
                RETURN_IF(literal(ps, "null"));
            }
            RETURN_IF(put_i64(&c->values, v));
            RETURN_IF(buf_byte(&c->values_valid, (unsigned char)present));
            c->n_values++;
            int ch = take_byte(ps);
            if (ch == ']') break;
            if (ch != ',') return NOT_FAST;
        }
    return end_item(c, 1);
}

/* An item of "Input type": null, or a string (decoded); NOT_FAST for others. */
static int dtype_item(Parser *ps, ListColumn *c) {
    if (next_byte(ps) != '"') {
        RETURN_IF(literal(ps, "null"));
        return end_item(c, 0);
    }
    Ptr content = ++ps->p;
    int escaped = 0;
    while (ps->p < ps->end && *ps->p != '"') { /* a checked string: an escape is two bytes */
        if (*ps->p == '\\') {
            escaped = 1;
            ps->p++;
        }
        ps->p++;
    }
    if (ps->p >= ps->end) return NOT_FAST;
    size_t len = (size_t)(ps->p++ - content);
    RETURN_IF(escaped ? unescape(content, len, &c->values) : buf_put(&c->values, content, len));
    c->n_values = c->values.len;
    return end_item(c, 1);
}

/* One event's value of a list column: the compact JSON `text` (len 0: absent), null or a list
 * of items that `item` reads (NULL: none); NOT_FAST for other values. */
static int list_value(ListColumn *c, Ptr text, size_t len, int (*item)(Parser *, ListColumn *)) {
    int valid = item != NULL && len != 0 && !(len == 4 && memcmp(text, "null", 4) == 0);
    if (valid) {
        Parser ps = {text, text + len, 0};
        if (take_byte(&ps) != '[') return NOT_FAST;
        if (next_byte(&ps) == ']') ps.p++;
        else
            for (;;) {
                RETURN_IF(item(&ps, c));
                int ch = take_byte(&ps);
                if (ch == ']') break;
                if (ch != ',') return NOT_FAST;
            }
        if (ps.p != ps.end) return NOT_FAST;
    }
    if (c->n_items > INT32_MAX) return NOT_FAST;
    RETURN_IF(put_i32(&c->lists_at, (int32_t)c->n_items));
    return buf_byte(&c->lists_valid, (unsigned char)valid);
}

/* A complete event's "Input Dims" and "Input type" (`t`: where their text lies in the args
 * text), added to the list columns, which start (nulls for the events before) at the first
 * event that has either; NOT_FAST where they are not of the simple form. */
static NOINLINE int add_lists(Batch *b, const TorchArgs *t) {
    static int (*const items[2])(Parser *, ListColumn *) = {dims_item, dtype_item};
    if (t->twice) return NOT_FAST;
    if (!b->lists_seen) {
        b->lists_seen = 1;
        for (size_t i = 0; i < b->n; i++)
            for (int k = 0; k < 2; k++) RETURN_IF(list_value(&b->lists[k], (Ptr) "", 0, NULL));
    }
    for (int i = 0; i < 2; i++) {
        Ptr text = t->len[i] ? (Ptr)b->args.data + t->at[i] : (Ptr) "";
        RETURN_IF(list_value(&b->lists[i], text, t->len[i], items[i]));
    }
    return OK;
}

/* A complete event's columns, from its fields (its args are in the args text already). */
static int add_complete(Batch *b, const Token *f, size_t args_start, const TorchArgs *t) {
    if (f[S].kind != ABSENT || f[ID].kind != ABSENT || f[BP].kind != ABSENT) return NOT_FAST;
    RETURN_IF(time_column(&b->ts, &f[TS]));
    RETURN_IF(time_column(&b->dur, &f[DUR]));
    RETURN_IF(process_id_column(b, 0, &f[PID]));
    RETURN_IF(process_id_column(b, 1, &f[TID]));
    RETURN_IF(label_column(&b->names, &b->name_labels, &f[NAME], &b->scratch, &b->last[NAME]));
    RETURN_IF(label_column(&b->cats, &b->cat_labels, &f[CAT], &b->scratch, &b->last[CAT]));
    RETURN_IF(optional_id_column(b, 0, &f[RECFN_ID]));
    RETURN_IF(optional_id_column(b, 1, &f[RECFN_PARENT_ID]));
    if (f[ARGS].kind == ABSENT) RETURN_IF(buf_put(&b->args, "null", 4));
    Ptr text = (Ptr)b->args.data + args_start;
    size_t len = b->args.len - args_start;
    int empty = (len == 4 && memcmp(text, "null", 4) == 0) ||
                (len == 2 && (text[0] == '{' || text[0] == '['));
    RETURN_IF(buf_byte(&b->has_args, !empty));
    RETURN_IF(put_i64(&b->args_at, (int64_t)b->args.len));
    RETURN_IF(put_i64(&b->torch[0], t->ints[0]));
    RETURN_IF(put_i64(&b->torch[1], t->ints[1]));
    if (b->lists_ok && (b->lists_seen || t->len[0] || t->len[1])) {
        int rc = add_lists(b, t);
        if (rc == FAILED) return FAILED;
        b->lists_ok = rc == OK;
    }
    b->n++;
    return OK;
}

/* Whether a time another event has may decode to a float of CHROME_EXACT_US microseconds or
 * more (recfn.formats.chrome._times.exact_times then reads it from its text): a number that is
 * that large or that does not convert here; not for absent or null times. */
static int time_is_large(const Token *t) {
    double f;
    if (t->kind == ABSENT || t->kind == IS_NULL) return 0;
    if (t->kind != IS_NUMBER || to_double(&t->number, &f) != OK) return 1;
    return !(fabs(f) < (double)CHROME_EXACT_US);
}

static size_t put_int(char *out, int64_t v);

/* The columns every columnar event (fields `f`, `phase` its ph) has, and a memory instant's
 * (zero, INT64_MIN, zero for a flow); NOT_FAST, nothing added, where its ts, pid, tid, name or
 * cat do not convert. Its name and cat go to the columnar events' own tables. */
static int add_columnar(Batch *b, const Token *f, unsigned char phase, int64_t bytes,
                        int64_t device_type, int64_t device_id) {
    int64_t ts, pid, tid;
    RETURN_IF(to_ns(&f[TS].number, &ts));
    RETURN_IF(to_int64(&f[PID].number, &pid));
    RETURN_IF(to_int64(&f[TID].number, &tid));
    size_t names = b->col_names.len, cats = b->col_cats.len;
    Token name = f[NAME], cat = f[CAT];
    name.code = cat.code = -1; /* a repeat's code (`repeat_of`) is a complete event's */
    Last unused;
    int rc = label_column(&b->col_names, &b->col_labels[0], &name, &b->scratch, &unused);
    if (rc == OK) rc = label_column(&b->col_cats, &b->col_labels[1], &cat, &b->scratch, &unused);
    if (rc != OK) {
        b->col_names.len = names, b->col_cats.len = cats;
        return rc;
    }
    RETURN_IF(put_i64(&b->col_ts, ts));
    RETURN_IF(put_i64(&b->col_pid, pid));
    RETURN_IF(put_i64(&b->col_tid, tid));
    RETURN_IF(buf_byte(&b->col_ph, phase));
    RETURN_IF(put_i64(&b->col_at, (int64_t)b->n_later));
    RETURN_IF(put_i64(&b->col_bytes, bytes));
    RETURN_IF(put_i64(&b->col_type, device_type));
    return put_i64(&b->col_id, device_id);
}

/* Whether a field is absent or a string of plain ASCII (no escape, nothing `plain_run` stops
 * at): the text a columnar event's args copy as it is. */
static int absent_or_plain(const Token *t) {
    return t->kind == ABSENT || (t->kind == IS_STRING && !t->escaped &&
                                 plain_run(t->text, t->text + t->len) == t->text + t->len);
}

/* A flow event's columns (`phase` its ph) where it has the form torch writes; NOT_FAST for
 * others (then its text goes to msgspec with the other events'), nothing added. */
static int add_flow(Batch *b, const Token *f, unsigned char phase) {
    if (phase != 's' && phase != 't' && phase != 'f') return NOT_FAST;
    if (f[TS].kind != IS_NUMBER || f[PID].kind != IS_NUMBER || f[TID].kind != IS_NUMBER ||
        f[ID].kind != IS_NUMBER || f[DUR].kind != ABSENT || f[S].kind != ABSENT ||
        f[ARGS].kind != ABSENT || f[RECFN_ID].kind != ABSENT || f[RECFN_PARENT_ID].kind != ABSENT)
        return NOT_FAST;
    for (int k = NAME; k <= CAT; k++)
        if (f[k].kind != ABSENT && f[k].kind != IS_NULL && f[k].kind != IS_STRING) return NOT_FAST;
    const Token *bp = &f[BP];
    if (!absent_or_plain(bp)) return NOT_FAST;
    int64_t id;
    RETURN_IF(to_int64(&f[ID].number, &id));
    char digits[24];
    RETURN_IF(add_columnar(b, f, phase, 0, INT64_MIN, 0));
    /* the args the msgspec path gives a flow: {"ph": ..., then its kept fields in KEPT order} */
    RETURN_IF(buf_put(&b->col_args, "{\"ph\":\"", 7));
    RETURN_IF(buf_byte(&b->col_args, phase));
    if (bp->kind != ABSENT) {
        RETURN_IF(buf_put(&b->col_args, "\",\"bp\":\"", 8));
        RETURN_IF(buf_put(&b->col_args, bp->text, bp->len));
    }
    RETURN_IF(buf_put(&b->col_args, "\",\"id\":", 7));
    RETURN_IF(buf_put(&b->col_args, digits, put_int(digits, id)));
    RETURN_IF(buf_byte(&b->col_args, '}'));
    RETURN_IF(put_i64(&b->col_args_at, (int64_t)b->col_args.len));
    b->n_columnar++;
    b->n_later++;
    return OK;
}

/* An integer as msgspec writes one (no sign on 0, no leading zeros, no fraction or exponent),
 * at most 18 digits, at `s`; its end, or NULL. */
static Ptr plain_int(Ptr s, Ptr end, int64_t *out) {
    int negative = s < end && *s == '-';
    Ptr digits = s + negative, p = digits;
    uint64_t v = 0;
    while (p < end && is_digit(*p) && p - digits < 19) v = v * 10 + (uint64_t)(*p++ - '0');
    size_t n = (size_t)(p - digits);
    if (n == 0 || n > 18 || (n > 1 && *digits == '0') || (negative && v == 0)) return NULL;
    *out = negative ? -(int64_t)v : (int64_t)v;
    return p;
}

enum { BYTES, DEVICE_TYPE, DEVICE_ID, N_MEMORY_ARGS };

/* The compact args text of a memory instant (`s` to `end`) where msgspec's path would write it
 * back the same: a flat object of at most 32 distinct plain keys (ASCII, no escapes; not "s",
 * "recfn_name" or "Device") with plain values (integers as msgspec writes them, true, false,
 * null, ASCII strings without escapes), Bytes, and Device Type and Device Id where present,
 * integers; those in `found` (INT64_MIN where absent); NOT_FAST for any other. */
static int memory_args(Ptr s, Ptr end, int64_t *found) {
    static const char *const names[N_MEMORY_ARGS] = {"Bytes", "Device Type", "Device Id"};
    Ptr keys[32];
    size_t lens[32], n = 0;
    for (int k = 0; k < N_MEMORY_ARGS; k++) found[k] = INT64_MIN;
    if (end - s < 2 || *s++ != '{' || *s == '}') return NOT_FAST;
    for (;;) {
        if (s >= end || *s++ != '"' || n == LENGTH(keys)) return NOT_FAST;
        Ptr key = s;
        s = plain_run(s, end);
        if (s >= end || *s != '"') return NOT_FAST;
        size_t len = (size_t)(s - key);
        s++;
        if (is_key(key, len, "s") || is_key(key, len, "recfn_name") || is_key(key, len, "Device"))
            return NOT_FAST;
        for (size_t i = 0; i < n; i++)
            if (lens[i] == len && memcmp(keys[i], key, len) == 0) return NOT_FAST;
        keys[n] = key, lens[n++] = len;
        int which = -1;
        for (int k = 0; k < N_MEMORY_ARGS; k++)
            if (is_key(key, len, names[k])) which = k;
        if (s >= end || *s++ != ':' || s >= end) return NOT_FAST;
        int64_t v;
        Ptr after = NULL;
        if (*s == '-' || is_digit(*s)) {
            after = plain_int(s, end, &v);
            if (after != NULL && which >= 0) found[which] = v;
        } else if (which < 0 && *s == '"') {
            Ptr close = plain_run(s + 1, end);
            after = close < end && *close == '"' ? close + 1 : NULL;
        } else if (which < 0) {
            const char *words[] = {"true", "false", "null"};
            for (int w = 0; w < 3 && after == NULL; w++) {
                size_t k = strlen(words[w]);
                if ((size_t)(end - s) >= k && memcmp(s, words[w], k) == 0) after = s + k;
            }
        }
        if (after == NULL || after >= end) return NOT_FAST;
        s = after;
        if (*s == '}') break;
        if (*s++ != ',') return NOT_FAST;
    }
    return found[BYTES] == INT64_MIN ? NOT_FAST : OK;
}

/* A memory instant's columns (`phase` "i" or "I"; its compact args text at `args_start` in
 * b->args) where it has the form torch writes; NOT_FAST for others, nothing added. */
static int add_memory(Batch *b, const Token *f, unsigned char phase, size_t args_start) {
    if (phase != 'i' && phase != 'I') return NOT_FAST;
    const Token *name = &f[NAME], *scope = &f[S];
    if (name->kind != IS_STRING || name->escaped || !is_key(name->text, name->len, "[memory]"))
        return NOT_FAST;
    if (f[TS].kind != IS_NUMBER || f[PID].kind != IS_NUMBER || f[TID].kind != IS_NUMBER ||
        f[ARGS].kind == ABSENT || f[DUR].kind != ABSENT || f[ID].kind != ABSENT ||
        f[BP].kind != ABSENT || f[RECFN_ID].kind != ABSENT || f[RECFN_PARENT_ID].kind != ABSENT)
        return NOT_FAST;
    if (f[CAT].kind != ABSENT && f[CAT].kind != IS_NULL && f[CAT].kind != IS_STRING)
        return NOT_FAST;
    if (!absent_or_plain(scope)) return NOT_FAST;
    Ptr args = (Ptr)b->args.data + args_start, args_end = (Ptr)b->args.data + b->args.len;
    int64_t found[N_MEMORY_ARGS];
    RETURN_IF(memory_args(args, args_end, found));
    if (found[DEVICE_TYPE] == INT64_MIN && found[DEVICE_ID] != INT64_MIN) return NOT_FAST;
    int64_t device_id = found[DEVICE_ID] == INT64_MIN ? 0 : found[DEVICE_ID];
    RETURN_IF(add_columnar(b, f, phase, found[BYTES], found[DEVICE_TYPE], device_id));
    /* the args the msgspec path gives it: its kept field (s) first, then its own */
    if (scope->kind != ABSENT) {
        RETURN_IF(buf_put(&b->col_args, "{\"s\":\"", 6));
        RETURN_IF(buf_put(&b->col_args, scope->text, scope->len));
        RETURN_IF(buf_put(&b->col_args, "\",", 2));
        RETURN_IF(buf_put(&b->col_args, args + 1, (size_t)(args_end - args - 1)));
    } else {
        RETURN_IF(buf_put(&b->col_args, args, (size_t)(args_end - args)));
    }
    RETURN_IF(put_i64(&b->col_args_at, (int64_t)b->col_args.len));
    b->n_columnar++;
    b->n_later++;
    return OK;
}

/* One event (p at its brace): a complete one's columns, a flow's or a memory instant's, or
 * another's text. */
static int event(Parser *ps, Batch *b) {
    Ptr start = ps->p;
    Token f[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) f[i].kind = ABSENT;
    size_t args_start = b->args.len;
    TorchArgs torch = {{b->torch_default[0], b->torch_default[1]}, {0, 0}, {0, 0}, 0};
    if (2 > ps->max_depth) return NOT_FAST;
    ps->p++;
    if (peek(ps) == '}') ps->p++;
    else
        for (;;) {
            Ptr key;
            size_t len;
            int escaped;
            if (peek(ps) != '"') return NOT_FAST;
            int which = known_field(ps);
            if (which == UNKNOWN) {
                RETURN_IF(scan_string(ps, &key, &len, &escaped));
                which = escaped ? -1 : field_of(key, len);
            }
            if (which < 0 || f[which].kind != ABSENT) return NOT_FAST;
            RETURN_IF(expect(ps, ':'));
            if (which == ARGS) {
                f[ARGS].kind = IS_OTHER;
                RETURN_IF(args_value(ps, b, &torch));
            } else if (which > CAT || !repeat_of(ps, &b->last[which], &f[which])) {
                RETURN_IF(token(ps, &f[which], 3));
            }
            int c = take(ps);
            if (c == '}') break;
            if (c != ',') return NOT_FAST;
        }
    const Token *ph = &f[PH];
    if (ph->kind == IS_STRING && ph->escaped) return NOT_FAST;
    if (ph->kind == IS_STRING) b->last[PH] = (Last){ph->text, ph->len, -1};
    if (ph->kind == IS_STRING && ph->len == 1 && ph->text[0] == 'X')
        return add_complete(b, f, args_start, &torch);
    int rc = NOT_FAST;
    if (ph->kind == IS_STRING && ph->len == 1 && !ph->escaped) {
        rc = add_memory(b, f, ph->text[0], args_start); /* reads its args text, then dropped */
        if (rc == NOT_FAST) rc = add_flow(b, f, ph->text[0]);
    }
    b->args.len = args_start;
    if (rc != NOT_FAST) return rc;
    b->n_later++; /* msgspec decodes the others */
    for (int k = TS; k <= DUR; k++) b->others_large |= time_is_large(&f[k]);
    RETURN_IF(buf_byte(&b->others, b->n_others++ ? ',' : '['));
    return buf_put(&b->others, start, (size_t)(ps->p - start));
}

/* The batch's JSON list of events; where `bare`, the text between its brackets. */
static int events(Parser *ps, Batch *b, int bare) {
    if (1 > ps->max_depth) return NOT_FAST;
    if (!bare) RETURN_IF(expect(ps, '['));
    RETURN_IF(put_i64(&b->args_at, 0));
    RETURN_IF(put_i64(&b->col_args_at, 0));
    for (int i = 0; i < 2; i++) {
        RETURN_IF(put_i32(&b->lists[i].lists_at, 0));
        RETURN_IF(put_i32(&b->lists[i].items_at, 0));
    }
    if (peek(ps) == (bare ? -1 : ']')) return NOT_FAST; /* nothing to gain */
    for (;;) {
        if (peek(ps) != '{') return NOT_FAST;
        RETURN_IF(event(ps, b));
        int c = take(ps);
        if (c == (bare ? -1 : ']')) break;
        if (c != ',') return NOT_FAST;
    }
    if (peek(ps) != -1) return NOT_FAST;
    if (b->n == 0 && b->n_columnar == 0) return NOT_FAST; /* nothing to gain */
    if (b->n_others) RETURN_IF(buf_byte(&b->others, ']'));
    return OK;
}

/* -- the result ---------------------------------------------------------------------------- */

static int set_item(PyObject *dict, const char *key, PyObject *value) {
    if (value == NULL) return FAILED;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc < 0 ? FAILED : OK;
}

/* A column's bytes, or None where `present` is false. */
static PyObject *bytes_or_none(const Buf *b, int present) {
    if (present) return buf_bytes(b);
    Py_INCREF(Py_None);
    return Py_None;
}

/* A list column's buffers as a tuple of bytes (the ints' validity only where `ints`; none
 * where no event has a value), or None where some value was not of the simple form. */
static PyObject *list_buffers(const Batch *b, int column) {
    if (!b->lists_ok) Py_RETURN_NONE;
    const ListColumn *c = &b->lists[column];
    const Buf *parts[] = {&c->lists_at, &c->lists_valid,  &c->items_at,
                          &c->items_valid, &c->values, &c->values_valid};
    Py_ssize_t n = !b->lists_seen ? 0 : column == 0 ? 6 : 5;
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *part = buf_bytes(parts[i]);
        if (part == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, part);
    }
    return out;
}

/* The args text: bytes, or where `allocate` is given, the writable buffer it returns for the
 * text's size (an Arrow buffer, in the memory pool where the table's strings are gathered),
 * filled with it: one copy, not one into bytes and another from there. */
static PyObject *args_text(const Buf *args, PyObject *allocate) {
    if (allocate == NULL) return buf_bytes(args);
    PyObject *out = PyObject_CallFunction(allocate, "n", (Py_ssize_t)args->len);
    if (out == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if ((size_t)view.len != args->len) {
        PyBuffer_Release(&view);
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, "decode: allocate gave a buffer of another size");
        return NULL;
    }
    if (args->len) memcpy(view.buf, args->data, args->len);
    PyBuffer_Release(&view);
    return out;
}

/* The batch's columns as a dict of bytes (native-endian arrays) and lists of strings. */
static PyObject *result(const Batch *b, PyObject *allocate) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    int rc = set_item(out, "n", PyLong_FromSize_t(b->n));
    rc = rc ? rc : set_item(out, "ts", buf_bytes(&b->ts));
    rc = rc ? rc : set_item(out, "dur", buf_bytes(&b->dur));
    rc = rc ? rc : set_item(out, "pid", buf_bytes(&b->pid));
    rc = rc ? rc : set_item(out, "tid", buf_bytes(&b->tid));
    rc = rc ? rc : set_item(out, "name.codes", buf_bytes(&b->names));
    rc = rc ? rc : set_item(out, "name.values", labels_list(&b->name_labels));
    rc = rc ? rc : set_item(out, "cat.codes", buf_bytes(&b->cats));
    rc = rc ? rc : set_item(out, "cat.values", labels_list(&b->cat_labels));
    rc = rc ? rc : set_item(out, "recfn_id", bytes_or_none(&b->ids[0], b->any_id[0]));
    rc = rc ? rc : set_item(out, "recfn_id.present", bytes_or_none(&b->has_id[0], b->any_id[0]));
    rc = rc ? rc : set_item(out, "recfn_parent_id", bytes_or_none(&b->ids[1], b->any_id[1]));
    rc = rc ? rc
            : set_item(out, "recfn_parent_id.present", bytes_or_none(&b->has_id[1], b->any_id[1]));
    rc = rc ? rc : set_item(out, "sequence_nr", buf_bytes(&b->torch[0]));
    rc = rc ? rc : set_item(out, "fwd_thread_id", buf_bytes(&b->torch[1]));
    rc = rc ? rc : set_item(out, "args.offsets", buf_bytes(&b->args_at));
    rc = rc ? rc : set_item(out, "args.data", args_text(&b->args, allocate));
    int dims = b->args.len >= 12 && memmem(b->args.data, b->args.len, "\"Input Dims\"", 12);
    rc = rc ? rc : set_item(out, "args.has_input_dims", PyBool_FromLong(dims));
    rc = rc ? rc : set_item(out, "args.present", buf_bytes(&b->has_args));
    rc = rc ? rc : set_item(out, "input_shapes", list_buffers(b, 0));
    rc = rc ? rc : set_item(out, "input_dtypes", list_buffers(b, 1));
    const char *id_keys[2][3] = {{"pid.text.at", "pid.text.codes", "pid.text.values"},
                                 {"tid.text.at", "tid.text.codes", "tid.text.values"}};
    for (int k = 0; k < 2; k++) {
        int any = b->id_text_at[k].len > 0;
        rc = rc ? rc : set_item(out, id_keys[k][0], bytes_or_none(&b->id_text_at[k], any));
        rc = rc ? rc : set_item(out, id_keys[k][1], bytes_or_none(&b->id_text_codes[k], any));
        if (any) rc = rc ? rc : set_item(out, id_keys[k][2], labels_list(&b->id_labels[k]));
        else rc = rc ? rc : set_item(out, id_keys[k][2], bytes_or_none(NULL, 0));
    }
    rc = rc ? rc : set_item(out, "columnar.n", PyLong_FromSize_t(b->n_columnar));
    const Buf *columnar[] = {&b->col_ts,   &b->col_pid,     &b->col_tid,  &b->col_names,
                             &b->col_cats, &b->col_ph,      &b->col_at,   &b->col_args_at,
                             &b->col_args, &b->col_bytes,   &b->col_type, &b->col_id};
    rc = rc ? rc : set_item(out, "columnar.name.values", labels_list(&b->col_labels[0]));
    rc = rc ? rc : set_item(out, "columnar.cat.values", labels_list(&b->col_labels[1]));
    const char *columnar_keys[] = {
        "columnar.ts",         "columnar.pid",         "columnar.tid",
        "columnar.name.codes", "columnar.cat.codes",   "columnar.ph",
        "columnar.at",         "columnar.args.offsets", "columnar.args.data",
        "columnar.bytes",      "columnar.device_type", "columnar.device_id"};
    for (size_t i = 0; i < LENGTH(columnar); i++)
        rc = rc ? rc
                : set_item(out, columnar_keys[i], bytes_or_none(columnar[i], b->n_columnar > 0));
    rc = rc ? rc : set_item(out, "others", bytes_or_none(&b->others, b->n_others > 0));
    rc = rc ? rc : set_item(out, "others.large", PyBool_FromLong(b->others_large));
    if (rc != OK) Py_CLEAR(out);
    return out;
}

static PyObject *decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "decode(text, max_depth, sequence_default, "
                                         "fwd_default[, allocate[, bare]])");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    long max_depth = PyLong_AsLong(args[1]);
    int64_t defaults[2] = {0, 0};
    if (!PyErr_Occurred()) defaults[0] = PyLong_AsLongLong(args[2]);
    if (!PyErr_Occurred()) defaults[1] = PyLong_AsLongLong(args[3]);
    int bare = nargs == 6 && !PyErr_Occurred() ? PyObject_IsTrue(args[5]) : 0;
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Parser ps = {(Ptr)view.buf, (Ptr)view.buf + view.len,
                 max_depth < 0 ? 0 : (max_depth > 1000 ? 1000 : (int)max_depth)};
    Batch b;
    memset(&b, 0, sizeof b);
    batch_reuse(&b);
    b.torch_default[0] = defaults[0];
    b.torch_default[1] = defaults[1];
    b.lists_ok = 1;
    int rc = events(&ps, &b, bare == 1);
    PyObject *allocate = nargs >= 5 && args[4] != Py_None ? args[4] : NULL;
    PyObject *out = rc == OK ? result(&b, allocate) : NULL;
    batch_free(&b);
    PyBuffer_Release(&view);
    if (rc == NOT_FAST) Py_RETURN_NONE;
    return out;
}

static PyObject *release(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    spare_free();
    Py_RETURN_NONE;
}

static PyObject *spare_bytes(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    size_t total = 0;
    for (size_t i = 0; i < N_BUFS; i++) total += spare[i].cap;
    return PyLong_FromSize_t(total);
}

/* -- nesting ------------------------------------------------------------------------------- */

/* nest(order, group, need, reach): rows sorted as recfn.formats.nesting sorts them (by group, start,
 * end descending, containers first; `order` their positions), with, in that order, their
 * group, the end a parent must reach (`need`: max(end, start + 1)) and the end they reach as
 * parents (`reach`: INT64_MIN for rows that contain nothing), all int64 arrays. Returns each
 * row's parent (the nearest earlier row of its group that reaches its need, -1 for none) and
 * depth as int64 bytes, by position: the answers of recfn.formats.nesting.parents_from_nesting and
 * depths. One pass with a stack of the rows that may still be parents (reach strictly
 * decreasing from the bottom: a row is dropped once a later one reaches as far), searched by
 * bisection. */
static PyObject *nest(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "nest(order, group, need, reach)");
        return NULL;
    }
    Py_buffer views[4];
    int got = 0;
    PyObject *parents = NULL, *depths = NULL, *out = NULL;
    int64_t *stack = NULL;
    for (; got < 4; got++)
        if (PyObject_GetBuffer(args[got], &views[got], PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n = views[0].len / 8;
    for (int i = 1; i < 4; i++)
        if (views[i].len != views[0].len) {
            PyErr_SetString(PyExc_ValueError, "nest: arrays of different lengths");
            goto done;
        }
    const int64_t *order = views[0].buf, *group = views[1].buf, *need = views[2].buf,
                  *reach = views[3].buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (order[i] < 0 || order[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "nest: a position out of range");
            goto done;
        }
    parents = PyBytes_FromStringAndSize(NULL, n * 8);
    depths = PyBytes_FromStringAndSize(NULL, n * 8);
    stack = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (parents == NULL || depths == NULL || stack == NULL) {
        if (stack == NULL) PyErr_NoMemory();
        goto done;
    }
    int64_t *parent = (int64_t *)PyBytes_AS_STRING(parents);
    int64_t *depth = (int64_t *)PyBytes_AS_STRING(depths);
    Py_ssize_t top = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || group[i] != group[i - 1]) top = 0;
        Py_ssize_t lo = 0, hi = top; /* the rows on the stack that reach `need`: [0, lo) */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (reach[stack[mid]] >= need[i]) lo = mid + 1;
            else hi = mid;
        }
        int64_t up = lo ? order[stack[lo - 1]] : -1;
        parent[order[i]] = up;
        depth[order[i]] = up >= 0 ? depth[up] + 1 : 0;
        if (reach[i] == INT64_MIN) continue;
        while (top > 0 && reach[stack[top - 1]] <= reach[i]) top--;
        stack[top++] = i;
    }
    out = PyTuple_Pack(2, parents, depths);
done:
    PyMem_Free(stack);
    Py_XDECREF(parents);
    Py_XDECREF(depths);
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return out;
}

/* -- complete events, written ---------------------------------------------------------------- */

/* Digits of v (an int64) at out; returns how many were written (at most 20). */
static size_t put_int(char *out, int64_t v) {
    char tmp[24];
    size_t k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t n = 0;
    if (v < 0) out[n++] = '-';
    while (k) out[n++] = tmp[--k];
    return n;
}

/* v nanoseconds as recfn.formats.chrome._times.micros_text writes its microseconds: the floor
 * of v / 1000, then its nanoseconds as three digits (`large`) or the shortest of them (".5",
 * ".0"). */
static size_t put_micros(char *out, int64_t v, int large) {
    int64_t whole = v / 1000, part = v % 1000;
    if (part < 0) {
        part += 1000;
        whole -= 1;
    }
    size_t n = put_int(out, whole);
    out[n++] = '.';
    char digits[3] = {(char)('0' + part / 100), (char)('0' + part / 10 % 10), (char)('0' + part % 10)};
    size_t keep = 3;
    if (!large) {
        while (keep > 1 && digits[keep - 1] == '0') keep--;
    }
    memcpy(out + n, digits, keep);
    return n + keep;
}

#define PUT(lit)                            \
    do {                                    \
        memcpy(w, lit, sizeof(lit) - 1);    \
        w += sizeof(lit) - 1;               \
    } while (0)

enum {
    C_TS, C_DUR, C_LARGE, C_PID, C_TID, C_NAME, C_NAME_AT, C_NAME_TEXT, C_CAT, C_CAT_AT,
    C_CAT_TEXT, C_ARGS_AT, C_ARGS_TEXT, C_PLAIN, C_EXTRA_AT, C_EXTRA_TEXT, C_EXTRA_HAS,
    C_EXTRA_VALUES, C_IDS, C_PARENTS, C_ROOTS, C_LINKS, C_N_ARGS
};

/* encode_complete(...): the "X" events of recfn.formats.chrome._writer.complete_events, comma
 * separated, built in one pass without the GIL. Arrays are int64 unless said: ts and dur
 * (nanoseconds, written as microseconds; `large` bit 0 and bit 1: three decimals always), pid,
 * tid, the name's and the category's code into a text table (offsets, int64 n+1, and bytes),
 * each row's args object as text (offsets and bytes) with `plain` (uint8): whether the extra
 * integer fields are appended to it (their labels ``,"key":`` as a text table, `extra_has`
 * uint8 and `extra_values` int64, one row of n per extra), ids, parents and roots (uint8: no
 * parent) written as recfn_id (links >= 1) and recfn_parent_id (links == 2). */
static PyObject *encode_complete(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != C_N_ARGS) {
        PyErr_Format(PyExc_TypeError, "encode_complete takes %d arguments", (int)C_N_ARGS);
        return NULL;
    }
    static const int is_buffer[C_N_ARGS] = {
        [C_TS] = 1, [C_DUR] = 1, [C_PID] = 1, [C_TID] = 1, [C_NAME] = 1, [C_NAME_AT] = 1,
        [C_NAME_TEXT] = 1, [C_CAT] = 1, [C_CAT_AT] = 1, [C_CAT_TEXT] = 1, [C_ARGS_AT] = 1,
        [C_ARGS_TEXT] = 1, [C_PLAIN] = 1, [C_EXTRA_AT] = 1, [C_EXTRA_TEXT] = 1,
        [C_EXTRA_HAS] = 1, [C_EXTRA_VALUES] = 1, [C_IDS] = 1, [C_PARENTS] = 1, [C_ROOTS] = 1};
    Py_buffer views[C_N_ARGS];
    int held[C_N_ARGS] = {0};
    PyObject *out = NULL;
    long large = PyLong_AsLong(args[C_LARGE]);
    long links = PyLong_AsLong(args[C_LINKS]);
    if (PyErr_Occurred()) return NULL;
    for (int i = 0; i < C_N_ARGS; i++) {
        if (!is_buffer[i]) continue;
        if (PyObject_GetBuffer(args[i], &views[i], PyBUF_SIMPLE) < 0) goto done;
        held[i] = 1;
    }
#define LEN(i) (views[i].len)
#define I64(i) ((const int64_t *)views[i].buf)
#define U8(i) ((const unsigned char *)views[i].buf)
#define TXT(i) ((const char *)views[i].buf)
    Py_ssize_t n = LEN(C_TS) / 8;
    Py_ssize_t names = LEN(C_NAME_AT) / 8 - 1, cats = LEN(C_CAT_AT) / 8 - 1;
    Py_ssize_t extras = LEN(C_EXTRA_AT) / 8 - 1;
    int sized = LEN(C_TS) == 8 * n && LEN(C_DUR) == 8 * n && LEN(C_PID) == 8 * n &&
                LEN(C_TID) == 8 * n && LEN(C_NAME) == 8 * n && LEN(C_CAT) == 8 * n &&
                LEN(C_ARGS_AT) == 8 * (n + 1) && LEN(C_PLAIN) == n && names >= 0 && cats >= 0 &&
                extras >= 0 && LEN(C_EXTRA_HAS) == extras * n &&
                LEN(C_EXTRA_VALUES) == 8 * extras * n && links >= 0 && links <= 2 &&
                (links < 1 || LEN(C_IDS) == 8 * n) &&
                (links < 2 || (LEN(C_PARENTS) == 8 * n && LEN(C_ROOTS) == n));
    if (!sized) {
        PyErr_SetString(PyExc_ValueError, "encode_complete: arrays of different lengths");
        goto done;
    }
    /* Text tables and codes checked, and the output's size bounded, before anything is written. */
    const int64_t *name_at = I64(C_NAME_AT), *cat_at = I64(C_CAT_AT), *args_at = I64(C_ARGS_AT);
    const int64_t *extra_at = I64(C_EXTRA_AT);
    struct {
        const int64_t *at;
        Py_ssize_t count, bytes;
    } tables[4] = {{name_at, names, LEN(C_NAME_TEXT)},
                   {cat_at, cats, LEN(C_CAT_TEXT)},
                   {args_at, n, LEN(C_ARGS_TEXT)},
                   {extra_at, extras, LEN(C_EXTRA_TEXT)}};
    for (int t = 0; t < 4; t++) {
        for (Py_ssize_t k = 0; k < tables[t].count; k++) {
            if (tables[t].at[k] < 0 || tables[t].at[k] > tables[t].at[k + 1] ||
                tables[t].at[k + 1] > tables[t].bytes) {
                PyErr_SetString(PyExc_ValueError, "encode_complete: text offsets out of range");
                goto done;
            }
        }
    }
    size_t longest_name = 0, longest_cat = 0, extra_bytes = 0;
    for (Py_ssize_t k = 0; k < names; k++)
        if ((size_t)(name_at[k + 1] - name_at[k]) > longest_name)
            longest_name = (size_t)(name_at[k + 1] - name_at[k]);
    for (Py_ssize_t k = 0; k < cats; k++)
        if ((size_t)(cat_at[k + 1] - cat_at[k]) > longest_cat)
            longest_cat = (size_t)(cat_at[k + 1] - cat_at[k]);
    for (Py_ssize_t k = 0; k < extras; k++) extra_bytes += (size_t)(extra_at[k + 1] - extra_at[k]) + 20;
    const int64_t *name = I64(C_NAME), *cat = I64(C_CAT);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (name[i] < 0 || name[i] >= names || cat[i] < 0 || cat[i] >= cats) {
            PyErr_SetString(PyExc_ValueError, "encode_complete: a code outside its text table");
            goto done;
        }
    }
    /* Per event: 150 bytes of field names and punctuation, 7 numbers of at most 21 bytes each. */
    size_t per_event = 150 + 7 * 21 + longest_name + longest_cat + extra_bytes + 2;
    size_t bound = (size_t)n * per_event + (size_t)(args_at[n] - args_at[0]);
    if (n && (bound - (size_t)(args_at[n] - args_at[0])) / (size_t)n != per_event) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (out == NULL) goto done;
    char *w = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    const int64_t *ts = I64(C_TS), *dur = I64(C_DUR), *pid = I64(C_PID), *tid = I64(C_TID);
    const int64_t *ids = links >= 1 ? I64(C_IDS) : NULL;
    const int64_t *parents = links >= 2 ? I64(C_PARENTS) : NULL;
    const unsigned char *roots = links >= 2 ? U8(C_ROOTS) : NULL;
    const unsigned char *plain = U8(C_PLAIN), *has = U8(C_EXTRA_HAS);
    const int64_t *values = I64(C_EXTRA_VALUES);
    const char *name_text = TXT(C_NAME_TEXT), *cat_text = TXT(C_CAT_TEXT);
    const char *args_text = TXT(C_ARGS_TEXT), *extra_text = TXT(C_EXTRA_TEXT);
    for (Py_ssize_t i = 0; i < n; i++) {
        PUT("{\"ph\":\"X\",\"cat\":");
        memcpy(w, cat_text + cat_at[cat[i]], (size_t)(cat_at[cat[i] + 1] - cat_at[cat[i]]));
        w += cat_at[cat[i] + 1] - cat_at[cat[i]];
        PUT(",\"name\":");
        memcpy(w, name_text + name_at[name[i]], (size_t)(name_at[name[i] + 1] - name_at[name[i]]));
        w += name_at[name[i] + 1] - name_at[name[i]];
        PUT(",\"pid\":");
        w += put_int(w, pid[i]);
        PUT(",\"tid\":");
        w += put_int(w, tid[i]);
        PUT(",\"ts\":");
        w += put_micros(w, ts[i], (int)(large & 1));
        PUT(",\"dur\":");
        w += put_micros(w, dur[i], (int)(large & 2));
        PUT(",\"args\":");
        const char *text = args_text + args_at[i];
        size_t size = (size_t)(args_at[i + 1] - args_at[i]);
        int tail = 0;
        if (plain[i])
            for (Py_ssize_t k = 0; k < extras; k++) tail |= has[k * n + i];
        if (!tail) {
            memcpy(w, text, size);
            w += size;
        } else {
            int empty = size == 2 && text[0] == '{' && text[1] == '}';
            if (empty) {
                *w++ = '{';
            } else {
                memcpy(w, text, size ? size - 1 : 0);
                w += size ? size - 1 : 0;
            }
            int first = 1;
            for (Py_ssize_t k = 0; k < extras; k++) {
                if (!has[k * n + i]) continue;
                const char *label = extra_text + extra_at[k];
                size_t label_size = (size_t)(extra_at[k + 1] - extra_at[k]);
                if (first && empty && label_size) { /* the label's leading comma goes */
                    label++;
                    label_size--;
                }
                first = 0;
                memcpy(w, label, label_size);
                w += label_size;
                w += put_int(w, values[k * n + i]);
            }
            *w++ = '}';
        }
        if (links >= 1) {
            PUT(",\"recfn_id\":");
            w += put_int(w, ids[i]);
            if (links == 2) {
                PUT(",\"recfn_parent_id\":");
                if (roots[i])
                    PUT("null");
                else
                    w += put_int(w, parents[i]);
            }
        }
        PUT("},");
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t used = (Py_ssize_t)(w - PyBytes_AS_STRING(out));
    if (used) used--; /* the last comma */
    if (_PyBytes_Resize(&out, used) < 0) out = NULL;
#undef LEN
#undef I64
#undef U8
#undef TXT
done:
    for (int i = 0; i < C_N_ARGS; i++)
        if (held[i]) PyBuffer_Release(&views[i]);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(text, max_depth, sequence_default, fwd_default): the columns of a JSON list of "
     "trace events (a dict), or None when the batch is not of the shape this decodes."},
    {"release", release, METH_NOARGS,
     "release(): free the buffers kept from the last batch for the next (a read's end)."},
    {"spare_bytes", spare_bytes, METH_NOARGS,
     "spare_bytes(): the bytes of the buffers kept for the next batch (for tests)."},
    {"nest", (PyCFunction)(void (*)(void))nest, METH_FASTCALL,
     "nest(order, group, need, reach): each row's parent and depth by interval nesting."},
    {"encode_complete", (PyCFunction)(void (*)(void))encode_complete, METH_FASTCALL,
     "encode_complete(...): complete (\"X\") events as Chrome JSON, comma separated (see "
     "recfn.formats.chrome._writer.complete_events)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "recfn.native._cchrome",
    .m_doc = "A native decoder for the common shape of Chrome trace events, and the writer's "
              "complete events.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__cchrome(void) { return PyModule_Create(&module); }
