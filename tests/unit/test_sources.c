/* test_sources — the rule languages of training.sources (doc/sources.h):
 * the glob dialect against a 540-row table that Python's `re` gave for the
 * spec's glob→regex translation (§1.9; the script is in the comment below),
 * the .dlm/ignore grammar and matcher (negation, anchoring, dir-only rules)
 * with hand-worked verdicts, the training.yaml validator, and the
 * section id of a synthesized source section (sha256 by python3 hashlib).
 * Whole-tree verdicts against a Python reference are tests/ref/r0701.
 *
 * Table generator (python3):
 *   def glob_re(p): '**' -> '.*' (+ swallow '/'), '*' -> '[^/]*', '?' -> '[^/]', else re.escape
 *   print(pat, path, bool(glob_re(pat).fullmatch(path))) */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "doc/sources.h"

static const struct { const char *pat, *path; int want; } GLOB[] = {
    {"**/*", "a", 1},
    {"**/*", "a.md", 1},
    {"**/*", "d/a.md", 1},
    {"**/*", "d/e/a.md", 1},
    {"**/*", "tests", 1},
    {"**/*", "tests/a", 1},
    {"**/*", "tests/x", 1},
    {"**/*", "tests/a/b/x", 1},
    {"**/*", ".env", 1},
    {"**/*", "x/.env", 1},
    {"**/*", ".env.local", 1},
    {"**/*", "x/.env.local", 1},
    {"**/*", "node_modules/a/b.js", 1},
    {"**/*", "x/node_modules/a.js", 1},
    {"**/*", "lib/app.min.js", 1},
    {"**/*", "a/b/c", 1},
    {"**/*", "a/x/b/y/c", 1},
    {"**/*", "abc", 1},
    {"**/*", "a/c", 1},
    {"**/*", "[ab].txt", 1},
    {"**/*", "a.txt", 1},
    {"**/*", "f.md", 1},
    {"**/*", "f.{md,rst}", 1},
    {"**/*", "axb", 1},
    {"**/*", "secrets.json", 1},
    {"**/*", "k/secrets.yaml", 1},
    {"**/*", "", 1},
    {"*", "a", 1},
    {"*", "a.md", 1},
    {"*", "d/a.md", 0},
    {"*", "d/e/a.md", 0},
    {"*", "tests", 1},
    {"*", "tests/a", 0},
    {"*", "tests/x", 0},
    {"*", "tests/a/b/x", 0},
    {"*", ".env", 1},
    {"*", "x/.env", 0},
    {"*", ".env.local", 1},
    {"*", "x/.env.local", 0},
    {"*", "node_modules/a/b.js", 0},
    {"*", "x/node_modules/a.js", 0},
    {"*", "lib/app.min.js", 0},
    {"*", "a/b/c", 0},
    {"*", "a/x/b/y/c", 0},
    {"*", "abc", 1},
    {"*", "a/c", 0},
    {"*", "[ab].txt", 1},
    {"*", "a.txt", 1},
    {"*", "f.md", 1},
    {"*", "f.{md,rst}", 1},
    {"*", "axb", 1},
    {"*", "secrets.json", 1},
    {"*", "k/secrets.yaml", 0},
    {"*", "", 1},
    {"*.md", "a", 0},
    {"*.md", "a.md", 1},
    {"*.md", "d/a.md", 0},
    {"*.md", "d/e/a.md", 0},
    {"*.md", "tests", 0},
    {"*.md", "tests/a", 0},
    {"*.md", "tests/x", 0},
    {"*.md", "tests/a/b/x", 0},
    {"*.md", ".env", 0},
    {"*.md", "x/.env", 0},
    {"*.md", ".env.local", 0},
    {"*.md", "x/.env.local", 0},
    {"*.md", "node_modules/a/b.js", 0},
    {"*.md", "x/node_modules/a.js", 0},
    {"*.md", "lib/app.min.js", 0},
    {"*.md", "a/b/c", 0},
    {"*.md", "a/x/b/y/c", 0},
    {"*.md", "abc", 0},
    {"*.md", "a/c", 0},
    {"*.md", "[ab].txt", 0},
    {"*.md", "a.txt", 0},
    {"*.md", "f.md", 1},
    {"*.md", "f.{md,rst}", 0},
    {"*.md", "axb", 0},
    {"*.md", "secrets.json", 0},
    {"*.md", "k/secrets.yaml", 0},
    {"*.md", "", 0},
    {"**/*.md", "a", 0},
    {"**/*.md", "a.md", 1},
    {"**/*.md", "d/a.md", 1},
    {"**/*.md", "d/e/a.md", 1},
    {"**/*.md", "tests", 0},
    {"**/*.md", "tests/a", 0},
    {"**/*.md", "tests/x", 0},
    {"**/*.md", "tests/a/b/x", 0},
    {"**/*.md", ".env", 0},
    {"**/*.md", "x/.env", 0},
    {"**/*.md", ".env.local", 0},
    {"**/*.md", "x/.env.local", 0},
    {"**/*.md", "node_modules/a/b.js", 0},
    {"**/*.md", "x/node_modules/a.js", 0},
    {"**/*.md", "lib/app.min.js", 0},
    {"**/*.md", "a/b/c", 0},
    {"**/*.md", "a/x/b/y/c", 0},
    {"**/*.md", "abc", 0},
    {"**/*.md", "a/c", 0},
    {"**/*.md", "[ab].txt", 0},
    {"**/*.md", "a.txt", 0},
    {"**/*.md", "f.md", 1},
    {"**/*.md", "f.{md,rst}", 0},
    {"**/*.md", "axb", 0},
    {"**/*.md", "secrets.json", 0},
    {"**/*.md", "k/secrets.yaml", 0},
    {"**/*.md", "", 0},
    {"tests/**", "a", 0},
    {"tests/**", "a.md", 0},
    {"tests/**", "d/a.md", 0},
    {"tests/**", "d/e/a.md", 0},
    {"tests/**", "tests", 0},
    {"tests/**", "tests/a", 1},
    {"tests/**", "tests/x", 1},
    {"tests/**", "tests/a/b/x", 1},
    {"tests/**", ".env", 0},
    {"tests/**", "x/.env", 0},
    {"tests/**", ".env.local", 0},
    {"tests/**", "x/.env.local", 0},
    {"tests/**", "node_modules/a/b.js", 0},
    {"tests/**", "x/node_modules/a.js", 0},
    {"tests/**", "lib/app.min.js", 0},
    {"tests/**", "a/b/c", 0},
    {"tests/**", "a/x/b/y/c", 0},
    {"tests/**", "abc", 0},
    {"tests/**", "a/c", 0},
    {"tests/**", "[ab].txt", 0},
    {"tests/**", "a.txt", 0},
    {"tests/**", "f.md", 0},
    {"tests/**", "f.{md,rst}", 0},
    {"tests/**", "axb", 0},
    {"tests/**", "secrets.json", 0},
    {"tests/**", "k/secrets.yaml", 0},
    {"tests/**", "", 0},
    {"tests/**/x", "a", 0},
    {"tests/**/x", "a.md", 0},
    {"tests/**/x", "d/a.md", 0},
    {"tests/**/x", "d/e/a.md", 0},
    {"tests/**/x", "tests", 0},
    {"tests/**/x", "tests/a", 0},
    {"tests/**/x", "tests/x", 1},
    {"tests/**/x", "tests/a/b/x", 1},
    {"tests/**/x", ".env", 0},
    {"tests/**/x", "x/.env", 0},
    {"tests/**/x", ".env.local", 0},
    {"tests/**/x", "x/.env.local", 0},
    {"tests/**/x", "node_modules/a/b.js", 0},
    {"tests/**/x", "x/node_modules/a.js", 0},
    {"tests/**/x", "lib/app.min.js", 0},
    {"tests/**/x", "a/b/c", 0},
    {"tests/**/x", "a/x/b/y/c", 0},
    {"tests/**/x", "abc", 0},
    {"tests/**/x", "a/c", 0},
    {"tests/**/x", "[ab].txt", 0},
    {"tests/**/x", "a.txt", 0},
    {"tests/**/x", "f.md", 0},
    {"tests/**/x", "f.{md,rst}", 0},
    {"tests/**/x", "axb", 0},
    {"tests/**/x", "secrets.json", 0},
    {"tests/**/x", "k/secrets.yaml", 0},
    {"tests/**/x", "", 0},
    {"**", "a", 1},
    {"**", "a.md", 1},
    {"**", "d/a.md", 1},
    {"**", "d/e/a.md", 1},
    {"**", "tests", 1},
    {"**", "tests/a", 1},
    {"**", "tests/x", 1},
    {"**", "tests/a/b/x", 1},
    {"**", ".env", 1},
    {"**", "x/.env", 1},
    {"**", ".env.local", 1},
    {"**", "x/.env.local", 1},
    {"**", "node_modules/a/b.js", 1},
    {"**", "x/node_modules/a.js", 1},
    {"**", "lib/app.min.js", 1},
    {"**", "a/b/c", 1},
    {"**", "a/x/b/y/c", 1},
    {"**", "abc", 1},
    {"**", "a/c", 1},
    {"**", "[ab].txt", 1},
    {"**", "a.txt", 1},
    {"**", "f.md", 1},
    {"**", "f.{md,rst}", 1},
    {"**", "axb", 1},
    {"**", "secrets.json", 1},
    {"**", "k/secrets.yaml", 1},
    {"**", "", 1},
    {"a?c", "a", 0},
    {"a?c", "a.md", 0},
    {"a?c", "d/a.md", 0},
    {"a?c", "d/e/a.md", 0},
    {"a?c", "tests", 0},
    {"a?c", "tests/a", 0},
    {"a?c", "tests/x", 0},
    {"a?c", "tests/a/b/x", 0},
    {"a?c", ".env", 0},
    {"a?c", "x/.env", 0},
    {"a?c", ".env.local", 0},
    {"a?c", "x/.env.local", 0},
    {"a?c", "node_modules/a/b.js", 0},
    {"a?c", "x/node_modules/a.js", 0},
    {"a?c", "lib/app.min.js", 0},
    {"a?c", "a/b/c", 0},
    {"a?c", "a/x/b/y/c", 0},
    {"a?c", "abc", 1},
    {"a?c", "a/c", 0},
    {"a?c", "[ab].txt", 0},
    {"a?c", "a.txt", 0},
    {"a?c", "f.md", 0},
    {"a?c", "f.{md,rst}", 0},
    {"a?c", "axb", 0},
    {"a?c", "secrets.json", 0},
    {"a?c", "k/secrets.yaml", 0},
    {"a?c", "", 0},
    {"**/.env", "a", 0},
    {"**/.env", "a.md", 0},
    {"**/.env", "d/a.md", 0},
    {"**/.env", "d/e/a.md", 0},
    {"**/.env", "tests", 0},
    {"**/.env", "tests/a", 0},
    {"**/.env", "tests/x", 0},
    {"**/.env", "tests/a/b/x", 0},
    {"**/.env", ".env", 1},
    {"**/.env", "x/.env", 1},
    {"**/.env", ".env.local", 0},
    {"**/.env", "x/.env.local", 0},
    {"**/.env", "node_modules/a/b.js", 0},
    {"**/.env", "x/node_modules/a.js", 0},
    {"**/.env", "lib/app.min.js", 0},
    {"**/.env", "a/b/c", 0},
    {"**/.env", "a/x/b/y/c", 0},
    {"**/.env", "abc", 0},
    {"**/.env", "a/c", 0},
    {"**/.env", "[ab].txt", 0},
    {"**/.env", "a.txt", 0},
    {"**/.env", "f.md", 0},
    {"**/.env", "f.{md,rst}", 0},
    {"**/.env", "axb", 0},
    {"**/.env", "secrets.json", 0},
    {"**/.env", "k/secrets.yaml", 0},
    {"**/.env", "", 0},
    {"**/.env.*", "a", 0},
    {"**/.env.*", "a.md", 0},
    {"**/.env.*", "d/a.md", 0},
    {"**/.env.*", "d/e/a.md", 0},
    {"**/.env.*", "tests", 0},
    {"**/.env.*", "tests/a", 0},
    {"**/.env.*", "tests/x", 0},
    {"**/.env.*", "tests/a/b/x", 0},
    {"**/.env.*", ".env", 0},
    {"**/.env.*", "x/.env", 0},
    {"**/.env.*", ".env.local", 1},
    {"**/.env.*", "x/.env.local", 1},
    {"**/.env.*", "node_modules/a/b.js", 0},
    {"**/.env.*", "x/node_modules/a.js", 0},
    {"**/.env.*", "lib/app.min.js", 0},
    {"**/.env.*", "a/b/c", 0},
    {"**/.env.*", "a/x/b/y/c", 0},
    {"**/.env.*", "abc", 0},
    {"**/.env.*", "a/c", 0},
    {"**/.env.*", "[ab].txt", 0},
    {"**/.env.*", "a.txt", 0},
    {"**/.env.*", "f.md", 0},
    {"**/.env.*", "f.{md,rst}", 0},
    {"**/.env.*", "axb", 0},
    {"**/.env.*", "secrets.json", 0},
    {"**/.env.*", "k/secrets.yaml", 0},
    {"**/.env.*", "", 0},
    {".env.*", "a", 0},
    {".env.*", "a.md", 0},
    {".env.*", "d/a.md", 0},
    {".env.*", "d/e/a.md", 0},
    {".env.*", "tests", 0},
    {".env.*", "tests/a", 0},
    {".env.*", "tests/x", 0},
    {".env.*", "tests/a/b/x", 0},
    {".env.*", ".env", 0},
    {".env.*", "x/.env", 0},
    {".env.*", ".env.local", 1},
    {".env.*", "x/.env.local", 0},
    {".env.*", "node_modules/a/b.js", 0},
    {".env.*", "x/node_modules/a.js", 0},
    {".env.*", "lib/app.min.js", 0},
    {".env.*", "a/b/c", 0},
    {".env.*", "a/x/b/y/c", 0},
    {".env.*", "abc", 0},
    {".env.*", "a/c", 0},
    {".env.*", "[ab].txt", 0},
    {".env.*", "a.txt", 0},
    {".env.*", "f.md", 0},
    {".env.*", "f.{md,rst}", 0},
    {".env.*", "axb", 0},
    {".env.*", "secrets.json", 0},
    {".env.*", "k/secrets.yaml", 0},
    {".env.*", "", 0},
    {"node_modules/**", "a", 0},
    {"node_modules/**", "a.md", 0},
    {"node_modules/**", "d/a.md", 0},
    {"node_modules/**", "d/e/a.md", 0},
    {"node_modules/**", "tests", 0},
    {"node_modules/**", "tests/a", 0},
    {"node_modules/**", "tests/x", 0},
    {"node_modules/**", "tests/a/b/x", 0},
    {"node_modules/**", ".env", 0},
    {"node_modules/**", "x/.env", 0},
    {"node_modules/**", ".env.local", 0},
    {"node_modules/**", "x/.env.local", 0},
    {"node_modules/**", "node_modules/a/b.js", 1},
    {"node_modules/**", "x/node_modules/a.js", 0},
    {"node_modules/**", "lib/app.min.js", 0},
    {"node_modules/**", "a/b/c", 0},
    {"node_modules/**", "a/x/b/y/c", 0},
    {"node_modules/**", "abc", 0},
    {"node_modules/**", "a/c", 0},
    {"node_modules/**", "[ab].txt", 0},
    {"node_modules/**", "a.txt", 0},
    {"node_modules/**", "f.md", 0},
    {"node_modules/**", "f.{md,rst}", 0},
    {"node_modules/**", "axb", 0},
    {"node_modules/**", "secrets.json", 0},
    {"node_modules/**", "k/secrets.yaml", 0},
    {"node_modules/**", "", 0},
    {"**/*.min.js", "a", 0},
    {"**/*.min.js", "a.md", 0},
    {"**/*.min.js", "d/a.md", 0},
    {"**/*.min.js", "d/e/a.md", 0},
    {"**/*.min.js", "tests", 0},
    {"**/*.min.js", "tests/a", 0},
    {"**/*.min.js", "tests/x", 0},
    {"**/*.min.js", "tests/a/b/x", 0},
    {"**/*.min.js", ".env", 0},
    {"**/*.min.js", "x/.env", 0},
    {"**/*.min.js", ".env.local", 0},
    {"**/*.min.js", "x/.env.local", 0},
    {"**/*.min.js", "node_modules/a/b.js", 0},
    {"**/*.min.js", "x/node_modules/a.js", 0},
    {"**/*.min.js", "lib/app.min.js", 1},
    {"**/*.min.js", "a/b/c", 0},
    {"**/*.min.js", "a/x/b/y/c", 0},
    {"**/*.min.js", "abc", 0},
    {"**/*.min.js", "a/c", 0},
    {"**/*.min.js", "[ab].txt", 0},
    {"**/*.min.js", "a.txt", 0},
    {"**/*.min.js", "f.md", 0},
    {"**/*.min.js", "f.{md,rst}", 0},
    {"**/*.min.js", "axb", 0},
    {"**/*.min.js", "secrets.json", 0},
    {"**/*.min.js", "k/secrets.yaml", 0},
    {"**/*.min.js", "", 0},
    {"a/**/b/**/c", "a", 0},
    {"a/**/b/**/c", "a.md", 0},
    {"a/**/b/**/c", "d/a.md", 0},
    {"a/**/b/**/c", "d/e/a.md", 0},
    {"a/**/b/**/c", "tests", 0},
    {"a/**/b/**/c", "tests/a", 0},
    {"a/**/b/**/c", "tests/x", 0},
    {"a/**/b/**/c", "tests/a/b/x", 0},
    {"a/**/b/**/c", ".env", 0},
    {"a/**/b/**/c", "x/.env", 0},
    {"a/**/b/**/c", ".env.local", 0},
    {"a/**/b/**/c", "x/.env.local", 0},
    {"a/**/b/**/c", "node_modules/a/b.js", 0},
    {"a/**/b/**/c", "x/node_modules/a.js", 0},
    {"a/**/b/**/c", "lib/app.min.js", 0},
    {"a/**/b/**/c", "a/b/c", 1},
    {"a/**/b/**/c", "a/x/b/y/c", 1},
    {"a/**/b/**/c", "abc", 0},
    {"a/**/b/**/c", "a/c", 0},
    {"a/**/b/**/c", "[ab].txt", 0},
    {"a/**/b/**/c", "a.txt", 0},
    {"a/**/b/**/c", "f.md", 0},
    {"a/**/b/**/c", "f.{md,rst}", 0},
    {"a/**/b/**/c", "axb", 0},
    {"a/**/b/**/c", "secrets.json", 0},
    {"a/**/b/**/c", "k/secrets.yaml", 0},
    {"a/**/b/**/c", "", 0},
    {"***", "a", 1},
    {"***", "a.md", 1},
    {"***", "d/a.md", 1},
    {"***", "d/e/a.md", 1},
    {"***", "tests", 1},
    {"***", "tests/a", 1},
    {"***", "tests/x", 1},
    {"***", "tests/a/b/x", 1},
    {"***", ".env", 1},
    {"***", "x/.env", 1},
    {"***", ".env.local", 1},
    {"***", "x/.env.local", 1},
    {"***", "node_modules/a/b.js", 1},
    {"***", "x/node_modules/a.js", 1},
    {"***", "lib/app.min.js", 1},
    {"***", "a/b/c", 1},
    {"***", "a/x/b/y/c", 1},
    {"***", "abc", 1},
    {"***", "a/c", 1},
    {"***", "[ab].txt", 1},
    {"***", "a.txt", 1},
    {"***", "f.md", 1},
    {"***", "f.{md,rst}", 1},
    {"***", "axb", 1},
    {"***", "secrets.json", 1},
    {"***", "k/secrets.yaml", 1},
    {"***", "", 1},
    {"*/*", "a", 0},
    {"*/*", "a.md", 0},
    {"*/*", "d/a.md", 1},
    {"*/*", "d/e/a.md", 0},
    {"*/*", "tests", 0},
    {"*/*", "tests/a", 1},
    {"*/*", "tests/x", 1},
    {"*/*", "tests/a/b/x", 0},
    {"*/*", ".env", 0},
    {"*/*", "x/.env", 1},
    {"*/*", ".env.local", 0},
    {"*/*", "x/.env.local", 1},
    {"*/*", "node_modules/a/b.js", 0},
    {"*/*", "x/node_modules/a.js", 0},
    {"*/*", "lib/app.min.js", 1},
    {"*/*", "a/b/c", 0},
    {"*/*", "a/x/b/y/c", 0},
    {"*/*", "abc", 0},
    {"*/*", "a/c", 1},
    {"*/*", "[ab].txt", 0},
    {"*/*", "a.txt", 0},
    {"*/*", "f.md", 0},
    {"*/*", "f.{md,rst}", 0},
    {"*/*", "axb", 0},
    {"*/*", "secrets.json", 0},
    {"*/*", "k/secrets.yaml", 1},
    {"*/*", "", 0},
    {"[ab].txt", "a", 0},
    {"[ab].txt", "a.md", 0},
    {"[ab].txt", "d/a.md", 0},
    {"[ab].txt", "d/e/a.md", 0},
    {"[ab].txt", "tests", 0},
    {"[ab].txt", "tests/a", 0},
    {"[ab].txt", "tests/x", 0},
    {"[ab].txt", "tests/a/b/x", 0},
    {"[ab].txt", ".env", 0},
    {"[ab].txt", "x/.env", 0},
    {"[ab].txt", ".env.local", 0},
    {"[ab].txt", "x/.env.local", 0},
    {"[ab].txt", "node_modules/a/b.js", 0},
    {"[ab].txt", "x/node_modules/a.js", 0},
    {"[ab].txt", "lib/app.min.js", 0},
    {"[ab].txt", "a/b/c", 0},
    {"[ab].txt", "a/x/b/y/c", 0},
    {"[ab].txt", "abc", 0},
    {"[ab].txt", "a/c", 0},
    {"[ab].txt", "[ab].txt", 1},
    {"[ab].txt", "a.txt", 0},
    {"[ab].txt", "f.md", 0},
    {"[ab].txt", "f.{md,rst}", 0},
    {"[ab].txt", "axb", 0},
    {"[ab].txt", "secrets.json", 0},
    {"[ab].txt", "k/secrets.yaml", 0},
    {"[ab].txt", "", 0},
    {"**/*.{md,rst}", "a", 0},
    {"**/*.{md,rst}", "a.md", 0},
    {"**/*.{md,rst}", "d/a.md", 0},
    {"**/*.{md,rst}", "d/e/a.md", 0},
    {"**/*.{md,rst}", "tests", 0},
    {"**/*.{md,rst}", "tests/a", 0},
    {"**/*.{md,rst}", "tests/x", 0},
    {"**/*.{md,rst}", "tests/a/b/x", 0},
    {"**/*.{md,rst}", ".env", 0},
    {"**/*.{md,rst}", "x/.env", 0},
    {"**/*.{md,rst}", ".env.local", 0},
    {"**/*.{md,rst}", "x/.env.local", 0},
    {"**/*.{md,rst}", "node_modules/a/b.js", 0},
    {"**/*.{md,rst}", "x/node_modules/a.js", 0},
    {"**/*.{md,rst}", "lib/app.min.js", 0},
    {"**/*.{md,rst}", "a/b/c", 0},
    {"**/*.{md,rst}", "a/x/b/y/c", 0},
    {"**/*.{md,rst}", "abc", 0},
    {"**/*.{md,rst}", "a/c", 0},
    {"**/*.{md,rst}", "[ab].txt", 0},
    {"**/*.{md,rst}", "a.txt", 0},
    {"**/*.{md,rst}", "f.md", 0},
    {"**/*.{md,rst}", "f.{md,rst}", 1},
    {"**/*.{md,rst}", "axb", 0},
    {"**/*.{md,rst}", "secrets.json", 0},
    {"**/*.{md,rst}", "k/secrets.yaml", 0},
    {"**/*.{md,rst}", "", 0},
    {"a.b", "a", 0},
    {"a.b", "a.md", 0},
    {"a.b", "d/a.md", 0},
    {"a.b", "d/e/a.md", 0},
    {"a.b", "tests", 0},
    {"a.b", "tests/a", 0},
    {"a.b", "tests/x", 0},
    {"a.b", "tests/a/b/x", 0},
    {"a.b", ".env", 0},
    {"a.b", "x/.env", 0},
    {"a.b", ".env.local", 0},
    {"a.b", "x/.env.local", 0},
    {"a.b", "node_modules/a/b.js", 0},
    {"a.b", "x/node_modules/a.js", 0},
    {"a.b", "lib/app.min.js", 0},
    {"a.b", "a/b/c", 0},
    {"a.b", "a/x/b/y/c", 0},
    {"a.b", "abc", 0},
    {"a.b", "a/c", 0},
    {"a.b", "[ab].txt", 0},
    {"a.b", "a.txt", 0},
    {"a.b", "f.md", 0},
    {"a.b", "f.{md,rst}", 0},
    {"a.b", "axb", 0},
    {"a.b", "secrets.json", 0},
    {"a.b", "k/secrets.yaml", 0},
    {"a.b", "", 0},
    {"**/secrets.*", "a", 0},
    {"**/secrets.*", "a.md", 0},
    {"**/secrets.*", "d/a.md", 0},
    {"**/secrets.*", "d/e/a.md", 0},
    {"**/secrets.*", "tests", 0},
    {"**/secrets.*", "tests/a", 0},
    {"**/secrets.*", "tests/x", 0},
    {"**/secrets.*", "tests/a/b/x", 0},
    {"**/secrets.*", ".env", 0},
    {"**/secrets.*", "x/.env", 0},
    {"**/secrets.*", ".env.local", 0},
    {"**/secrets.*", "x/.env.local", 0},
    {"**/secrets.*", "node_modules/a/b.js", 0},
    {"**/secrets.*", "x/node_modules/a.js", 0},
    {"**/secrets.*", "lib/app.min.js", 0},
    {"**/secrets.*", "a/b/c", 0},
    {"**/secrets.*", "a/x/b/y/c", 0},
    {"**/secrets.*", "abc", 0},
    {"**/secrets.*", "a/c", 0},
    {"**/secrets.*", "[ab].txt", 0},
    {"**/secrets.*", "a.txt", 0},
    {"**/secrets.*", "f.md", 0},
    {"**/secrets.*", "f.{md,rst}", 0},
    {"**/secrets.*", "axb", 0},
    {"**/secrets.*", "secrets.json", 1},
    {"**/secrets.*", "k/secrets.yaml", 1},
    {"**/secrets.*", "", 0},
};

static void test_glob(void)
{
    for (size_t i = 0; i < sizeof GLOB / sizeof GLOB[0]; i++)
        CHECK_MSG(src_glob_match(GLOB[i].pat, GLOB[i].path) == GLOB[i].want, "'%s' vs '%s' want %d", GLOB[i].pat,
                  GLOB[i].path, GLOB[i].want);
    /* pathological patterns stay linear (a backtracking matcher would hang) */
    char pat[200], s[4000];
    for (int i = 0; i < 60; i++) { pat[3 * i] = '*'; pat[3 * i + 1] = '*'; pat[3 * i + 2] = 'a'; }
    pat[180] = 'b';
    pat[181] = 0;
    memset(s, 'a', sizeof s - 1);
    s[sizeof s - 1] = 0;
    CHECK(!src_glob_match(pat, s));
    /* every default exclude of §1.9, each with a path it must exclude */
    static const char *const hits[] = {
        ".git/HEAD", ".hg/x", ".svn/x", ".env", ".env.local", "a/.env", "a/.env.prod", "k/id_rsa", "id_ed25519",
        "c/server.pem", "tls.key", "secrets.yaml", "p/__pycache__/m.pyc", "m.pyc", "m.pyo", ".venv/lib/x.py",
        "venv/x", ".tox/x", "node_modules/a/b.js", "app.min.js", "s.min.css", "x.js.map", "target/debug/x",
        "l.rlib", "A.class", "a.jar", "a.o", "liba.so", "a.dylib", "a.dll", "build/out", "dist/x",
        "__generated__/x", "generated/x", "w/package-lock.json", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock",
        "uv.lock", "poetry.lock", "Pipfile.lock", "f.ico", "d.pdf", "z.zip", "t.tar", "t.gz", "t.xz", "t.bz2",
        "t.7z", "m.wasm", ".dlm/corpus.dlm", "sub/.dlm/ignore", NULL};
    int n = 0;
    while (src_default_excludes[n]) n++;
    CHECK_INT(n, 52);
    for (int i = 0; hits[i]; i++) {
        CHECK_MSG(src_glob_match(src_default_excludes[i], hits[i]), "default '%s' must exclude '%s'",
                  src_default_excludes[i], hits[i]);
    }
    /* anchored-at-root defaults do not reach nested copies (the original's rule) */
    int nested = 0;
    for (int i = 0; src_default_excludes[i]; i++) nested |= src_glob_match(src_default_excludes[i], "a/node_modules/x.js");
    CHECK(!nested);
}

static void test_ignore(void)
{
    const char *text = "# comment\n   # indented comment\n\nsecret/\n!keep.log\n*.log\n!keep.log\n/root.txt\n"
                       "!\n/\n!/\ndocs/**/*.md\n  spaced.txt   \n";
    src_ignore_rule *r;
    int n = src_ignore_parse("ign", text, strlen(text), &r);
    CHECK_INT(n, 7);
    CHECK_STR(r[0].pattern, "secret");
    CHECK(r[0].dir_only && !r[0].anchored && !r[0].negate);
    CHECK_INT(r[0].line, 4);
    CHECK(r[1].negate);
    CHECK(r[4].anchored);
    CHECK_STR(r[4].pattern, "root.txt");
    CHECK_STR(r[6].pattern, "  spaced.txt");   /* rstrip only: leading blanks are pattern */
    CHECK_INT(r[6].line, 13);
    /* dir-only: a file named like the rule does not match, files beneath do */
    CHECK(!src_ignore_match(&r[0], "secret", 0));
    CHECK(src_ignore_match(&r[0], "secret", 1));
    CHECK(src_ignore_match(&r[0], "secret/pw.txt", 0));
    CHECK(src_ignore_match(&r[0], "a/secret/b/pw.txt", 0));
    /* unanchored: any suffix */
    CHECK(src_ignore_match(&r[2], "a/b/x.log", 0));
    /* anchored: only from the anchor */
    CHECK(src_ignore_match(&r[4], "root.txt", 0));
    CHECK(!src_ignore_match(&r[4], "a/root.txt", 0));
    CHECK(src_ignore_match(&r[5], "docs/a/b.md", 0));
    CHECK(src_ignore_match(&r[5], "x/docs/b.md", 0));
    /* last match wins: keep.log excluded by *.log, re-included by the later ! */
    int ex = 0;
    for (int i = 0; i < n; i++)
        if (src_ignore_match(&r[i], "keep.log", 0)) ex = !r[i].negate;
    CHECK(!ex);
    ex = 0;
    for (int i = 0; i < n; i++)
        if (src_ignore_match(&r[i], "other.log", 0)) ex = !r[i].negate;
    CHECK(ex);
    src_ignore_free(r, n);
    /* anchored dir-only never matches files (the original's quirk) */
    n = src_ignore_parse("ign", "/build/\n", 8, &r);
    CHECK_INT(n, 1);
    CHECK(!src_ignore_match(&r[0], "build/x.c", 0));
    src_ignore_free(r, n);
}

static void test_yaml(void)
{
    src_yaml y;
    dlm_err e;
    const char *ok = "dlm_training_version: 1\ninclude: ['**/*.py']\nexclude: [tests/**]\nexclude_defaults: no\n"
                     "metadata: {lang: py}\nweights: {lang: {py: 2, c: 0.5}}\n";
    CHECK_INT(src_yaml_parse("t.yaml", ok, strlen(ok), &y, &e), 0);
    CHECK_INT(y.include.n, 1);
    CHECK_STR(y.include.v[0], "**/*.py");
    CHECK_STR(y.exclude.v[0], "tests/**");
    CHECK_INT(y.exclude_defaults, 0);
    CHECK_INT(y.n_metadata, 1);
    CHECK_STR(y.metadata[0].val, "py");
    CHECK_INT(y.n_weights, 2);
    CHECK_NEAR(y.weights[0].w, 2.0, 0);
    CHECK_NEAR(y.weights[1].w, 0.5, 0);
    src_yaml_free(&y);
    CHECK_INT(src_yaml_parse("t.yaml", "", 0, &y, &e), 0);
    CHECK_INT(y.exclude_defaults, 1);
    src_yaml_free(&y);
    static const char *const bad[] = {
        "bogus: 1\n", "dlm_training_version: 2\n", "include: '**/*'\n", "include: [1]\n", "metadata: {a: 1}\n",
        "weights: {a: {b: -1}}\n", "weights: {a: 3}\n", "exclude_defaults: maybe\n", "- a\n", "include: [\n",
        "metadata: {1: a}\n", NULL};
    for (int i = 0; bad[i]; i++) {
        int rc = src_yaml_parse("t.yaml", bad[i], strlen(bad[i]), &y, &e);
        CHECK_MSG(rc == -1, "'%s' must be refused", bad[i]);
        if (rc == 0) src_yaml_free(&y);
        else CHECK_MSG(e.line >= 1, "'%s': no line in the error", bad[i]);
    }
}

static void test_section_id(void)
{
    /* python3: hashlib.sha256(b"prose\n# source: a/b.md\n\nhello\nworld\n").hexdigest()[:16] */
    const char *c = "# source: a/b.md\n\nhello\nworld\n";
    char id[17];
    doc_section_id(DOC_PROSE, c, strlen(c), id);
    CHECK_STR(id, "a05056e1d2297ee5");
}

int main(void)
{
    test_glob();
    test_ignore();
    test_yaml();
    test_section_id();
    return check_done();
}
