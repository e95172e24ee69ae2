/* dlm completion bash|zsh|fish — a shell completion script, generated from
 * the command table (main.c's dlm_commands) and each command's option
 * table, so it can never list an option the parser does not take. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"

const cmd_spec spec_completion = {
    "completion", "bash|zsh|fish",
    "print a shell completion script for dlm",
    "bash:  eval \"$(dlm completion bash)\"   (or save it under\n"
    "       ~/.local/share/bash-completion/completions/dlm)\n"
    "zsh:   dlm completion zsh > \"${fpath[1]}/_dlm\"   (then compinit)\n"
    "fish:  dlm completion fish > ~/.config/fish/completions/dlm.fish\n"
    "Commands and their options complete; other words complete as file names.",
    NULL,
};

/* the same list as main.c's dlm_commands (both expand DLM_COMMAND_LIST;
 * the table itself lives in the program, not the library) */
typedef struct comp_cmd {
    const char *name;
    const cmd_spec *spec;
} comp_cmd;
static const comp_cmd CMDS[] = {
#define X(n) {#n, &spec_##n},
    DLM_COMMAND_LIST(X)
#undef X
    {NULL, NULL},
};

/* the original's subcommands, which live in the commands' own code */
static const char *subcommands(const char *cmd)
{
    if (!strcmp(cmd, "preference")) return "mine apply revert list";
    if (!strcmp(cmd, "synth")) return "instructions preferences apply revert list";
    if (!strcmp(cmd, "metrics")) return "show watch";
    if (!strcmp(cmd, "cache")) return "show prune clear";
    if (!strcmp(cmd, "templates")) return "list";
    return NULL;
}

/* help text inside a quote of the given kind: single-quoted (bash/fish
 * escape ' as '\'' and \' respectively) or a zsh _arguments [description] */
static void put_help(const char *s, int shell)
{
    for (; s && *s; s++) {
        char c = *s;
        if (c == '\'') fputs(shell == 2 ? "\\'" : "'\\''", stdout);
        else if (shell == 2 && c == '\\') fputs("\\\\", stdout);
        else if (shell == 1 && (c == '[' || c == ']')) putchar(c == '[' ? '(' : ')');
        else if (shell == 1 && c == ':') fputs("\\:", stdout);
        else if (c == '\n') putchar(' ');
        else putchar(c);
    }
}

static void bash_script(void)
{
    printf("# dlm bash completion (dlm completion bash)\n_dlm() {\n"
           "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"\" opts=\"\" subs=\"\" i\n"
           "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
           "        case \"${COMP_WORDS[i]}\" in\n"
           "            --home) ((i++)) ;;\n"
           "            -*) ;;\n"
           "            *) cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
           "        esac\n"
           "    done\n"
           "    if [ -z \"$cmd\" ]; then\n"
           "        COMPREPLY=($(compgen -W \"help version");
    for (const comp_cmd *c = CMDS; c->name; c++) printf(" %s", c->name);
    printf(" --home --verbose --quiet --help --version\" -- \"$cur\"))\n        return\n    fi\n"
           "    case \"$cmd\" in\n");
    for (const comp_cmd *c = CMDS; c->name; c++) {
        printf("        %s) opts=\"", c->name);
        for (const opt *o = c->spec->opts; o && o->type != OPT_END; o++) printf("--%s ", o->name);
        printf("\"");
        const char *s = subcommands(c->name);
        if (s) printf("; subs=\"%s\"", s);
        printf(" ;;\n");
    }
    printf("    esac\n"
           "    if [[ \"$cur\" == -* ]]; then\n"
           "        COMPREPLY=($(compgen -W \"$opts--home --verbose --quiet --help\" -- \"$cur\"))\n"
           "    elif [ -n \"$subs\" ] && [ \"$i\" -eq $((COMP_CWORD - 1)) ]; then\n"
           "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
           "    fi\n"
           "}\ncomplete -o default -F _dlm dlm\n");
}

static void zsh_script(void)
{
    printf("#compdef dlm\n# dlm zsh completion (dlm completion zsh)\n_dlm() {\n"
           "    local -a cmds opts subs\n    cmds=(\n");
    for (const comp_cmd *c = CMDS; c->name; c++) {
        printf("        '%s:", c->name);
        put_help(c->spec->summary, 1);
        printf("'\n");
    }
    printf("    )\n    if (( CURRENT == 2 )); then _describe command cmds; return; fi\n"
           "    case ${words[2]} in\n");
    for (const comp_cmd *c = CMDS; c->name; c++) {
        printf("        %s) opts=(", c->name);
        for (const opt *o = c->spec->opts; o && o->type != OPT_END; o++) {
            printf(" '--%s[", o->name);
            put_help(o->help, 1);
            printf("]%s'", o->type == OPT_FLAG ? "" : ":value:_files");
        }
        printf(" )");
        const char *s = subcommands(c->name);
        if (s) printf("; subs=(%s)", s);
        printf(" ;;\n");
    }
    printf("    esac\n"
           "    if (( ${#subs} && CURRENT == 3 )); then _describe subcommand subs; return; fi\n"
           "    _arguments -s $opts '--home[store root]:dir:_files -/' '--verbose' '--quiet' '--help' '*:file:_files'\n"
           "}\n"
           "if [ \"$funcstack[1]\" = \"_dlm\" ]; then _dlm \"$@\"; else compdef _dlm dlm; fi\n");
}

static void fish_script(void)
{
    printf("# dlm fish completion (dlm completion fish)\n"
           "complete -c dlm -n __fish_use_subcommand -l home -r -d 'store root'\n");
    for (const comp_cmd *c = CMDS; c->name; c++) {
        printf("complete -c dlm -f -n __fish_use_subcommand -a %s -d '", c->name);
        put_help(c->spec->summary, 2);
        printf("'\n");
        const char *s = subcommands(c->name);
        if (s) printf("complete -c dlm -f -n '__fish_seen_subcommand_from %s' -a '%s'\n", c->name, s);
        for (const opt *o = c->spec->opts; o && o->type != OPT_END; o++) {
            printf("complete -c dlm -n '__fish_seen_subcommand_from %s' -l %s%s -d '", c->name, o->name,
                   o->type == OPT_FLAG ? "" : " -r");
            put_help(o->help, 2);
            printf("'\n");
        }
    }
}

int cmd_completion(int argc, char **argv, dlm_ctx *ctx)
{
    char *pos[8];
    int npos;
    char dummy;
    if (argc > 8) return cmd_usage_error(&spec_completion, "too many arguments");
    int r = opts_parse(&spec_completion, argc, argv, ctx, &dummy, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_completion, "completion takes one shell: bash, zsh or fish");
    if (!strcmp(pos[0], "bash")) bash_script();
    else if (!strcmp(pos[0], "zsh")) zsh_script();
    else if (!strcmp(pos[0], "fish")) fish_script();
    else return cmd_usage_error(&spec_completion, "unknown shell '%s' (bash, zsh or fish)", pos[0]);
    return EXIT_OK;
}
