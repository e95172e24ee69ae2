/* cmd_tokenize — `dlm tokenize`: text to token ids (and back with
 * --decode) with a base's own tokenizer, the same ids HF tokenizers gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "weights/base.h"
#include "tokens/tok.h"
#include "tokens/tok_gguf.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct tokenize_args {
    const char *base, *tokenizer;
    int json, lines, no_special, add_special, decode, skip_special, time;
} tokenize_args;

static const opt tokenize_opts[] = {
    {"base", 0, OPT_STR, offsetof(tokenize_args, base), "B", "tokenizer of a base: registry key, hf:org/name, path, tiny"},
    {"tokenizer", 't', OPT_STR, offsetof(tokenize_args, tokenizer), "FILE", "a tokenizer.json (or a .gguf)"},
    {"json", 0, OPT_FLAG, offsetof(tokenize_args, json), NULL, "print a JSON array (with -v: ids and token strings)"},
    {"lines", 0, OPT_FLAG, offsetof(tokenize_args, lines), NULL, "each input line separately; one JSON array per line"},
    {"no-special", 0, OPT_FLAG, offsetof(tokenize_args, no_special), NULL, "special-token strings in the text stay text"},
    {"add-special", 0, OPT_FLAG, offsetof(tokenize_args, add_special), NULL, "add BOS/EOS as the tokenizer's post-processor does"},
    {"decode", 0, OPT_FLAG, offsetof(tokenize_args, decode), NULL, "input is ids (space-separated or a JSON array); print the text"},
    {"skip-special", 0, OPT_FLAG, offsetof(tokenize_args, skip_special), NULL, "with --decode: leave special tokens out"},
    {"time", 0, OPT_FLAG, offsetof(tokenize_args, time), NULL, "print load and encode time and MB/s to stderr"},
    {0, 0, OPT_END, 0, 0, 0},
};

const cmd_spec spec_tokenize = {
    "tokenize",
    "(--base B | --tokenizer FILE | PATH) [--json] [--lines] [--no-special] [--add-special] [TEXT | -]",
    "turn text into token ids with a model's tokenizer",
    "PATH is an HF model folder holding tokenizer.json (tokenizer_config.json beside it\n"
    "is read too). Without TEXT, or with '-', the text is read from standard input.\n"
    "The default equals HF encode(text, add_special_tokens=False): special-token\n"
    "strings in the text become their ids. Output: one line of space-separated ids.",
    tokenize_opts,
};

static int read_stdin(strbuf *sb)
{
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        if (sb_append(sb, buf, n)) return -1;
    return ferror(stdin) ? -1 : 0;
}

/* The tokenizer of a base spec (registry key, hf:, path, tiny), resolved
 * through the HF cache like every other command. */
static int open_base(const char *spec, tok **t, dlm_err *e)
{
    hub_opts ho;
    base_ref ref;
    char path[4096];
    if (hub_opts_init(&ho, e) || base_resolve(spec, &ho, &ref, path, sizeof path, e)) return -1;
    return tok_load_for_model(path, t, e);
}

static int open_tokenizer(const char *path, tok **t, dlm_err *e)
{
    if (str_endswith(path, ".gguf")) return tok_load_gguf(path, t, e);
    if (str_endswith(path, ".dlm")) {
        dlm_doc *d = doc_load(path, e);
        if (!d) return -1;
        int rc = open_base(doc_fm(d)->base_model, t, e);
        doc_free(d);
        return rc;
    }
    char p[4096];
    if (fs_is_dir(path)) {
        if (!fs_join(p, sizeof p, path, "tokenizer.json")) return err_set(e, NULL, "path too long");
        if (!fs_is_file(p)) {
            err_set(e, "TokenizerError", "%s: no tokenizer.json in this folder", path);
            return err_hint(e, "PATH must be an HF model folder, or use --tokenizer FILE");
        }
        path = p;
    }
    return tok_load(path, NULL, t, e);
}

/* Ids joined by sep; printf per id would cost more than the encoding. */
static void put_ids(strbuf *o, const int32_t *ids, size_t n, char sep)
{
    if (sb_reserve(o, n * 12)) return;
    char *p = o->buf + o->len;
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = sep;
        char tmp[12];
        int k = 0;
        uint32_t v = (uint32_t)ids[i];
        do tmp[k++] = (char)('0' + v % 10); while ((v /= 10));
        while (k) *p++ = tmp[--k];
    }
    o->len = (size_t)(p - o->buf);
    o->buf[o->len] = 0;
}

static void put_ids_json(strbuf *o, const int32_t *ids, size_t n)
{
    sb_putc(o, '[');
    put_ids(o, ids, n, ',');
    sb_putc(o, ']');
}

static void put_verbose_json(strbuf *o, const tok *t, const int32_t *ids, size_t n)
{
    json_t *toks = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *s = tok_token_str(t, ids[i], &l);
        json_array_append_new(toks, json_stringn(s ? s : "", s ? l : 0));
    }
    sb_puts(o, "{\"ids\":");
    put_ids_json(o, ids, n);
    sb_puts(o, ",\"tokens\":");
    json_write(o, toks, JW_COMPACT);
    sb_putc(o, '}');
    json_decref(toks);
}

/* Ids from "1 2 3" or "[1, 2, 3]". */
static int parse_ids(const char *s, size_t n, tok_ids *ids)
{
    ids->n = 0;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            i++;
            continue;
        }
        if (c < '0' || c > '9') return -1;
        long long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            v = v * 10 + (s[i++] - '0');
            if (v > INT32_MAX) return -1;
        }
        if (tok_ids_push(ids, (int32_t)v)) return -1;
    }
    return 0;
}

static int decode_one(const tok *t, const char *s, size_t n, tok_ids *ids, strbuf *o, int as_json, int skip_special,
                      dlm_err *e)
{
    if (parse_ids(s, n, ids)) return err_set(e, NULL, "--decode expects token ids, got \"%.40s\"", s);
    strbuf text = STRBUF_INIT;
    if (tok_decode(t, ids->v, ids->n, skip_special, &text)) {
        sb_free(&text);
        return err_set(e, NULL, "token id out of range (vocabulary size %zu)", tok_vocab_size(t));
    }
    if (as_json) {
        json_t *js = json_stringn(sb_str(&text), text.len);
        json_write(o, js, JW_COMPACT);
        json_decref(js);
    } else sb_append(o, sb_str(&text), text.len);
    sb_free(&text);
    return 0;
}

int cmd_tokenize(int argc, char **argv, dlm_ctx *ctx)
{
    tokenize_args a = {0};
    char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int npos = 0;
    if (!pos) return EXIT_FAIL;
    int rc = opts_parse(&spec_tokenize, argc, argv, ctx, &a, pos, &npos);
    if (rc) {
        free(pos);
        return rc == 1 ? EXIT_OK : EXIT_USAGE;
    }
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) {
        free(pos);
        return cmd_fail(ctx, &e);
    }
    const char *src = a.tokenizer;
    int pi = 0;
    if (a.base && a.tokenizer) {
        free(pos);
        return cmd_usage_error(&spec_tokenize, "--base and --tokenizer are mutually exclusive");
    }
    if (!src && !a.base) {
        if (npos < 1) {
            free(pos);
            return cmd_usage_error(&spec_tokenize, "which tokenizer? give --tokenizer FILE or an HF model folder");
        }
        src = pos[pi++];
    }
    if (npos - pi > 1) {
        free(pos);
        return cmd_usage_error(&spec_tokenize, "expected one TEXT argument (or '-'), got %d", npos - pi);
    }
    const char *text_arg = pi < npos ? pos[pi] : NULL;
    free(pos);

    double t0 = time_mono();
    tok *t;
    if (a.base ? open_base(a.base, &t, &e) : open_tokenizer(src, &t, &e)) return cmd_fail(ctx, &e);
    double t_load = time_mono() - t0;

    strbuf in = STRBUF_INIT;
    if (!text_arg || !strcmp(text_arg, "-")) {
        if (read_stdin(&in)) {
            tok_free(t);
            sb_free(&in);
            err_set(&e, NULL, "cannot read standard input");
            return cmd_fail(ctx, &e);
        }
    } else sb_puts(&in, text_arg);

    int flags = (a.no_special ? 0 : TOK_PARSE_SPECIAL) | (a.add_special ? TOK_ADD_SPECIAL : 0);
    tok_ids ids = {0, 0, 0};
    strbuf o = STRBUF_INIT;
    const char *s = sb_str(&in);
    size_t n = in.len, ntok = 0;
    rc = 0;
    double t1 = time_mono(), t_enc = 0;
    if (a.lines) {
        size_t i = 0, lineno = 0;
        while (i < n && !rc) {
            lineno++;
            const char *nl = memchr(s + i, '\n', n - i);
            size_t end = nl ? (size_t)(nl - s) : n;
            if (a.decode) rc = decode_one(t, s + i, end - i, &ids, &o, 1, a.skip_special, &e);
            else {
                ids.n = 0;
                double te = time_mono();
                rc = tok_encode_append(t, s + i, end - i, flags, &ids, &e);
                t_enc += time_mono() - te;
                if (!rc) put_ids_json(&o, ids.v, ids.n);
                ntok += ids.n;
            }
            sb_putc(&o, '\n');
            if (o.len > (1u << 20)) {
                fwrite(o.buf, 1, o.len, stdout);
                sb_reset(&o);
            }
            if (rc) err_prefix(&e, "line %zu", lineno);
            i = end + 1;
        }
    } else if (a.decode) {
        rc = decode_one(t, s, n, &ids, &o, 0, a.skip_special, &e);
    } else {
        double te = time_mono();
        rc = tok_encode_append(t, s, n, flags, &ids, &e);
        t_enc += time_mono() - te;
        ntok = ids.n;
        if (!rc) {
            if (a.json && ctx->verbose) put_verbose_json(&o, t, ids.v, ids.n);
            else if (a.json) put_ids_json(&o, ids.v, ids.n);
            else put_ids(&o, ids.v, ids.n, ' ');
            sb_putc(&o, '\n');
        }
    }
    if (a.decode) t_enc = time_mono() - t1;
    if (!rc) fwrite(o.buf ? o.buf : "", 1, o.len, stdout);
    if (!rc && a.time)
        fprintf(stderr, "tokenize: load %.3f s; %s %zu bytes -> %zu tokens in %.3f s (%.2f MB/s)\n", t_load,
                a.decode ? "decoded" : "encoded", n, ntok, t_enc, t_enc > 0 ? n / t_enc / 1e6 : 0.0);
    sb_free(&o);
    sb_free(&in);
    tok_ids_free(&ids);
    tok_free(t);
    return rc ? cmd_fail(ctx, &e) : EXIT_OK;
}
