/* synth: reply parsing on noisy model output; the difflib ratio on fixed
 * values that Python 3 prints (python3 -c 'import difflib; print(difflib.
 * SequenceMatcher(None, A, B).ratio())'), then 400 random pairs (short and
 * long, so b's autojunk rule of 200+ items is exercised; ASCII and a few
 * multi-byte letters) against /usr/bin/python3's difflib: the same ratio
 * to the last bit, the same normalisation and the same > 0.95 decision. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "util/str.h"
#include "infer/synth.h"

static void parse(const char *text, int want_n, int want_rej)
{
    synth_pair *v;
    int n, rej, found;
    dlm_err e;
    CHECK(synth_parse_reply(text, strlen(text), &v, &n, &rej, &found, &e) == 0);
    CHECK_INT(n, want_n);
    CHECK_INT(rej, want_rej);
    synth_pairs_free(v, n);
}

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

/* A random string over a small alphabet, so matches are frequent. */
static void rand_str(strbuf *sb, int maxlen)
{
    static const char *const atoms[] = {"a", "b", "c", "d", " ", "  ", "E", "\n", "é", "Ж", "\t", "x"};
    int n = (int)(rnd() % (uint64_t)maxlen);
    for (int i = 0; i < n; i++) sb_puts(sb, atoms[rnd() % 12]);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void against_python(void)
{
    const char *dir = check_tmpdir("synth");
    char in[4200], cmd[9000];
    snprintf(in, sizeof in, "%s/pairs.json", dir);
    FILE *f = fopen(in, "w");
    CHECK(f != NULL);
    if (!f) return;
    enum { N = 400 };
    static strbuf a[N], b[N];
    fputs("[", f);
    for (int i = 0; i < N; i++) {
        int maxlen = i % 4 == 0 ? 600 : 60;
        rand_str(&a[i], maxlen);
        if (i % 3 == 0) {   /* b an edited copy of a: ratios near the 0.95 line */
            sb_puts(&b[i], sb_str(&a[i]));
            if (b[i].len > 2 && rnd() % 2) {
                size_t at = rnd() % b[i].len;
                if ((unsigned char)b[i].buf[at] < 0x80) b[i].buf[at] = 'z';   /* keep the UTF-8 whole */
            }
        } else rand_str(&b[i], maxlen);
        fputs(i ? ",[" : "[", f);
        json_str(f, sb_str(&a[i]));
        fputc(',', f);
        json_str(f, sb_str(&b[i]));
        fputs("]", f);
    }
    fputs("]\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json, sys, difflib\n"
             "n = lambda s: \" \".join(s.strip().lower().split())\n"
             "for a, b in json.load(open(sys.argv[1])):\n"
             "    r = difflib.SequenceMatcher(None, a, b).ratio()\n"
             "    print(repr(r), json.dumps(n(a), ensure_ascii=False), int(n(a) == n(b) or difflib.SequenceMatcher(None, n(a) + \"\\n\" + n(b), n(b) + \"\\n\" + n(a)).ratio() > 0.95))' %s",
             in);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    char line[8192];
    int i = 0, bad = 0;
    while (i < N && fgets(line, sizeof line, p)) {
        char *sp = strchr(line, ' ');
        if (!sp) break;
        double want = strtod(line, NULL);
        double got = synth_ratio(sb_str(&a[i]), sb_str(&b[i]));
        if (got != want && bad++ < 5) fprintf(stderr, "pair %d: ratio %.17g, python %.17g\n", i, got, want);
        /* the normalised text, as JSON, then the dedup decision */
        char *last = strrchr(line, ' ');
        *last = 0;
        char *njb = NULL;
        size_t njl = 0;
        strbuf norm = STRBUF_INIT;
        synth_normalize(&norm, sb_str(&a[i]));
        FILE *mf = open_memstream(&njb, &njl);
        json_str(mf, sb_str(&norm));
        fclose(mf);
        if (strcmp(njb, sp + 1) && bad++ < 5) fprintf(stderr, "pair %d: normalised %s, python %s\n", i, njb, sp + 1);
        free(njb);
        sb_free(&norm);
        int dup = synth_is_near_dup(sb_str(&a[i]), sb_str(&b[i]), sb_str(&b[i]), sb_str(&a[i]));
        if (dup != atoi(last + 1) && bad++ < 5) fprintf(stderr, "pair %d: dup %d, python %s", i, dup, last + 1);
        i++;
    }
    CHECK(pclose(p) == 0);
    CHECK_INT(i, N);
    CHECK_INT(bad, 0);
    for (int k = 0; k < N; k++) { sb_free(&a[k]); sb_free(&b[k]); }
}

int main(void)
{
    against_python();
    parse("Sure! Here you go:\n```json\n[{\"question\": \"Q1?\", \"answer\": \"A1.\"},\n"
          " {\"question\": \"Q2?\", \"answer\": \"A2.\"},]\n```\nHope it helps.", 2, 0);
    parse("[1] see below. [{\"question\": \"a\", \"answer\": \"b\"}, {\"question\": \"\", \"answer\": \"x\"},"
          " \"junk\", 3, {\"question\": \"c\"}, {\"question\": \"d\", \"answer\": 5}, {\"q\": \"e\", \"a\": \"f\"}]", 2, 5);
    parse("no json here", 0, 0);
    parse("[{\"question\": \"unterminated", 0, 0);
    parse("{\"pairs\": [{\"question\": \"x ] y\", \"answer\": \"[z,]\" , }, ]}", 1, 0);
    CHECK(fabs(synth_ratio("abcd", "bcde") - 0.75) < 1e-12);
    CHECK(synth_ratio("", "") == 1.0);
    CHECK(synth_ratio("abc", "") == 0.0);
    /* Python: SequenceMatcher(None, "private Thread currentThread;", "private volatile Thread currentThread;").ratio() */
    CHECK(fabs(synth_ratio("private Thread currentThread;", "private volatile Thread currentThread;") -
               0.8656716417910447) < 1e-12);
    CHECK(synth_is_near_dup("What is  X?", "One.", "what is x?", "Two."));
    CHECK(!synth_is_near_dup("What is X?", "One.", "What is Y?", "Something else entirely."));
    return check_done();
}
