/* Unit tests for src/tokens/jinja: each construct chat templates use, with
 * the output worked out by hand from Jinja's rules; errors with locations;
 * limits.
 *
 * Mode for tests/ref/r0104-jinja-templates.sh:
 *   test_jinja --render TEMPLATE CONVS.json KEY   as tests/ref/chat/render.js
 *       render: for each conversation {system, messages} (system, when set,
 *       becomes the first message; conversations whose "skip" names KEY are
 *       left out), without then with add_generation_prompt, with
 *       bos_token <|begin_of_text|>, eos_token <|eot_id|>, date_string
 *       26 Jul 2024; one JSON string a line */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "tokens/jinja.h"
#include "util/fs.h"
#include "util/json.h"

static void expect_vars(const char *tmpl, const char *vars_json, const char *want)
{
    dlm_err e;
    jinja_tmpl *t;
    int rc = jinja_parse(tmpl, strlen(tmpl), &t, &e);
    CHECK_MSG(rc == 0, "parse \"%s\": %s", tmpl, e.msg);
    if (rc) return;
    json_t *v = vars_json ? json_loads(vars_json, 0, NULL) : NULL;
    strbuf sb = STRBUF_INIT;
    rc = jinja_render(t, v, &sb, &e);
    CHECK_MSG(rc == 0, "render \"%s\": %s", tmpl, e.msg);
    if (!rc) CHECK_MSG(!strcmp(sb_str(&sb), want), "\"%s\" gave \"%s\", want \"%s\"", tmpl, sb_str(&sb), want);
    sb_free(&sb);
    json_decref(v);
    jinja_free(t);
}

static void expect(const char *tmpl, const char *want) { expect_vars(tmpl, NULL, want); }

static void expect_error(const char *tmpl, const char *vars_json, const char *msg_part)
{
    dlm_err e;
    jinja_tmpl *t;
    int rc = jinja_parse(tmpl, strlen(tmpl), &t, &e);
    if (!rc) {
        json_t *v = vars_json ? json_loads(vars_json, 0, NULL) : NULL;
        strbuf sb = STRBUF_INIT;
        sb_puts(&sb, "keep");
        rc = jinja_render(t, v, &sb, &e);
        CHECK_STR(sb_str(&sb), "keep"); /* nothing appended on error */
        sb_free(&sb);
        json_decref(v);
        jinja_free(t);
    }
    CHECK_MSG(rc == -1, "\"%s\" should fail", tmpl);
    if (rc == -1) CHECK_MSG(strstr(e.msg, msg_part) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", tmpl, e.msg, msg_part);
}

static void test_text_and_whitespace(void)
{
    expect("hello", "hello");
    expect("hello\n", "hello");                       /* one trailing newline dropped */
    expect("a {{- ' b ' -}} c", "a b c");
    expect("a\n  {%- if true %}x{% endif -%}\n  b", "axb");
    expect("{% if true %}\nx{% endif %}", "x");       /* trim_blocks */
    expect("  {% if true %}x{% endif %}", "x");       /* lstrip_blocks */
    expect("  {{ 'x' }}", "  x");                     /* not for expressions */
    expect("a{# note #}b", "ab");
    expect("a {#- note -#} b", "ab");
}

static void test_expressions(void)
{
    expect("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}", "7|9|3|-4|1|1024");
    expect("{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 1.5 + 1 }}", "3.5|2.0|2.5");
    expect("{{ 'a' ~ 1 ~ 'b' }}|{{ 'a' + 'b' }}", "a1b|ab");
    expect("{{ 1 == 1 }}|{{ 'a' != 'a' }}|{{ 2 < 3 and 3 <= 3 }}|{{ not true or false }}", "true|false|true|false");
    expect("{{ 'x' if false else 'y' }}|{{ 'b' in 'abc' }}|{{ 4 not in [1, 2] }}", "y|true|true");
    expect("{{ [1, 2, 3][1:] }}|{{ [1, 2, 3][::-1] }}|{{ 'hello'[1:3] }}|{{ [1, 2, 3][-1] }}", "[2, 3]|[3, 2, 1]|el|3");
    expect("{{ {'a': 1, 'b': [true, none]} }}", "{\"a\": 1, \"b\": [true, null]}");
    expect("{{ none }}|{{ undefined_name }}|", "||");
    expect("{{ 'a' 'b' }}", "ab"); /* adjacent literals concatenate */
}

static void test_filters_and_methods(void)
{
    expect("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}",
           "x|AB|ab|Hello World|Hello");
    expect("{{ [1, 2] | length }}|{{ 'abc' | length }}|{{ [3, 4] | first }}|{{ [3, 4] | last }}|{{ ['a', 'b'] | join(', ') }}",
           "2|3|3|4|a, b");
    expect("{{ x | default('d') }}|{{ '' | default('d', true) }}|{{ 'abca' | replace('a', 'x') }}|{{ 3 | string }}",
           "d|d|xbcx|3");
    expect("{{ '12' | int + 1 }}|{{ [1, 2] | reverse | list }}|{{ {'k': 'v'} | items | list }}", "13|[2, 1]|[[\"k\", \"v\"]]");
    expect("{{ {'a': 'x\"y', 'b': 2} | tojson }}", "{\"a\": \"x\\\"y\", \"b\": 2}");
    expect("{{ {'a': [1, 2]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
    expect("{{ ' a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ '\n a\n'.lstrip('\n') }}|{{ 'ab'.startswith('a') }}|{{ 'ab'.endswith(('x', 'b')) }}",
           "a b|axx| a\n|true|true");
    expect("{{ 'a,b,c'.split(',') }}|{{ 'a b  c'.split() | length }}|{{ 'a<t>b'.split('<t>')[-1] }}", "[\"a\", \"b\", \"c\"]|3|b");
    expect("{{ 'abc'.upper() }}|{{ 'x{}y{}'.format(1, 'z') }}|{{ 'aXa'.replace('a', '') }}", "ABC|x1yz|X");
    expect_vars("{{ users | selectattr('admin') | map(attribute='name') | join(' ') }}",
                "{\"users\":[{\"name\":\"a\",\"admin\":true},{\"name\":\"b\",\"admin\":false},{\"name\":\"c\",\"admin\":true}]}",
                "a c");
    expect_vars("{{ ms | selectattr('role', 'equalto', 'user') | list | length }}",
                "{\"ms\":[{\"role\":\"user\"},{\"role\":\"system\"},{\"role\":\"user\"}]}", "2");
}

static void test_tests(void)
{
    expect("{{ x is defined }}|{{ none is none }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 1 is number }}",
           "false|true|true|true|true|true");
    expect("{{ 3 is odd }}|{{ 'a' is not string }}|{{ [1] is sequence }}|{{ x is undefined }}", "true|false|true|true");
}

static void test_statements(void)
{
    expect("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", "11,22,33");
    expect("{% for x in [1, 2, 3] %}{{ loop.index0 }}{{ loop.first }}{{ loop.length }}{{ loop.revindex }} {% endfor %}",
           "0true33 1false32 2false31 ");
    expect("{% for x in [] %}a{% else %}empty{% endfor %}", "empty");
    expect("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% endfor %}", "24");
    expect("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    expect("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}", "ab");
    expect("{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "13");
    expect("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "1");
    /* set inside a loop stays in the loop; namespace carries it out */
    expect("{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{% endfor %}{{ a }}", "1");
    expect("{% set ns = namespace(a=1) %}{% for x in [1, 2] %}{% set ns.a = ns.a + x %}{% endfor %}{{ ns.a }}", "4");
    expect("{% set x %}in{{ 1 }}{% endset %}[{{ x }}]", "[in1]");
    expect("{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c");
    expect("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}{{ m('x', 'y') }}", "<1B><23><xy>");
    expect("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}body{% endcall %}", "[body]");
    expect("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
    expect("{{ range(3) | list }}|{{ range(1, 7, 2) | join }}", "[0, 1, 2]|135");
    expect_vars("{% for m in messages %}{{ m['role'] }}:{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"add_generation_prompt\":true}", "user:hi\nA:");
}

/* strftime_now: the clock, unless a string is bound to the name, which
 * pins it (the date a dialect stands for; tokens/chat.c SmolLM3) */
static void test_strftime_pin(void)
{
    expect_vars("{{ strftime_now('%d %B %Y') }}", "{\"strftime_now\": \"08 July 2025\"}", "08 July 2025");
    expect_vars("{% set t = strftime_now('%Y') %}[{{ t }}]", "{\"strftime_now\": \"08 July 2025\"}", "[08 July 2025]");
    /* bound to something else than a string, it is that value (not callable) */
    expect_error("{{ strftime_now('%Y') }}", "{\"strftime_now\": 3}", "");
}

static void test_errors(void)
{
    expect_error("{{ raise_exception('Roles must alternate') }}", NULL, "Roles must alternate");
    expect_error("{% if x %}", NULL, "endif");
    expect_error("{{ 1 + }}", NULL, "unexpected");
    expect_error("{% frobnicate %}", NULL, "unknown statement");
    expect_error("{{ x | nosuchfilter }}", "{\"x\":1}", "unknown filter");
    /* syntax errors carry a location */
    dlm_err e;
    jinja_tmpl *t;
    CHECK_INT(jinja_parse("x\n{{ 'a' ~ }}", 13, &t, &e), -1);
    CHECK_INT(e.line, 2);
    expect_error("{{ x.y }}", NULL, "undefined");
    /* limits: runaway loops and recursion fail instead of hanging */
    expect_error("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", NULL, "more than");
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, "deeply");
    /* deep nesting in the parser: an error, not a stack overflow */
    strbuf deep = STRBUF_INIT;
    sb_puts(&deep, "{{ ");
    for (int i = 0; i < 100000; i++) sb_puts(&deep, "not ");
    sb_puts(&deep, "1 }}");
    expect_error(sb_str(&deep), NULL, "deeply");
    sb_reset(&deep);
    for (int i = 0; i < 5000; i++) sb_puts(&deep, "{% if 1 %}");
    expect_error(sb_str(&deep), NULL, "deeply");
    sb_reset(&deep);
    sb_puts(&deep, "{{ f");
    for (int i = 0; i < 100000; i++) sb_puts(&deep, "()");
    sb_puts(&deep, " }}");
    expect_error(sb_str(&deep), NULL, "deeply");
    sb_free(&deep);
    expect("{{ [1, 2, 3][::9223372036854775807] }}|{{ range(2) | list }}", "[1]|[0, 1]");
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, "memory");
}

/* ---- mode for the reference test -------------------------------------------------------- */

static int mode_render(const char *tpath, const char *cpath, const char *key)
{
    dlm_err e;
    char *src;
    size_t n;
    if (fs_read_all(tpath, 1u << 20, &src, &n, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    jinja_tmpl *t;
    if (jinja_parse(src, n, &t, &e)) {
        fprintf(stderr, "%s: %s\n", tpath, e.msg);
        free(src);
        return 1;
    }
    free(src);
    json_t *convs = json_load_path(cpath, 1u << 20, &e);
    if (!json_is_array(convs)) {
        fprintf(stderr, "bad conversations file\n");
        return 1;
    }
    size_t i;
    json_t *c;
    int rc = 0;
    json_array_foreach(convs, i, c) {
        if (json_object_get(json_object_get(c, "skip"), key)) continue;
        json_t *ms = json_object_get(c, "messages"), *sys = json_object_get(c, "system");
        json_t *msgs = json_array();
        json_t *first = json_array_get(ms, 0);
        if (json_is_string(sys) && !(first && !strcmp(jget_str(first, "role") ? jget_str(first, "role") : "", "system")))
            json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", sys));
        json_array_extend(msgs, ms);
        for (int gen = 0; gen < 2; gen++) {
            json_t *vars = json_pack("{s:O,s:b,s:s,s:s,s:s}", "messages", msgs, "add_generation_prompt", gen, "bos_token",
                                     "<|begin_of_text|>", "eos_token", "<|eot_id|>", "date_string", "26 Jul 2024");
            strbuf sb = STRBUF_INIT;
            if (jinja_render(t, vars, &sb, &e)) {
                /* the reference throws too: print the error as a marker line */
                printf("\"ERROR\"\n");
                fprintf(stderr, "conversation %zu: %s\n", i, e.msg);
            } else {
                json_t *s = json_stringn(sb_str(&sb), sb.len);
                strbuf o = STRBUF_INIT;
                json_write(&o, s, JW_COMPACT);
                printf("%s\n", sb_str(&o));
                sb_free(&o);
                json_decref(s);
            }
            sb_free(&sb);
            json_decref(vars);
        }
        json_decref(msgs);
    }
    json_decref(convs);
    jinja_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--render")) return mode_render(argv[2], argv[3], argv[4]);
    test_text_and_whitespace();
    test_expressions();
    test_filters_and_methods();
    test_tests();
    test_statements();
    test_errors();
    test_strftime_pin();
    return check_done();
}
