/* mlx_serve — the mlx-serve export target (see mlx_serve.h). */
#include "export/mlx_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weights/safetensors.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

static int add_name(char names[][64], int cap, int *n, const char *s, dlm_err *e)
{
    if (*n >= cap) return err_set(e, "ExportError", "too many files in the mlx-serve export");
    snprintf(names[(*n)++], 64, "%s", s);
    return 0;
}

/* mlx-lm matches target modules by their name inside a block: the
 * original's _qualify_target_module */
static json_t *qualified(const char *name)
{
    static const char *const ATTN[] = {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "wqkv", NULL};
    static const char *const MLP[] = {"gate_proj", "up_proj", "down_proj", "fc1", "fc2", NULL};
    char buf[128];
    if (strchr(name, '.')) return json_string(name);
    for (int i = 0; ATTN[i]; i++)
        if (!strcmp(name, ATTN[i])) { snprintf(buf, sizeof buf, "self_attn.%s", name); return json_string(buf); }
    for (int i = 0; MLP[i]; i++)
        if (!strcmp(name, MLP[i])) { snprintf(buf, sizeof buf, "mlp.%s", name); return json_string(buf); }
    return json_string(name);
}

/* PEFT "base_model.model.X.lora_A.weight" → mlx-lm "X.lora_a" */
static void mlx_key(const char *peft, char *out, size_t cap)
{
    const char *p = !strncmp(peft, "base_model.model.", 17) ? peft + 17 : peft;
    snprintf(out, cap, "%s", p);
    size_t n = strlen(out);
    if (n > 14 && !strcmp(out + n - 14, ".lora_A.weight")) snprintf(out + n - 14, cap - (n - 14), ".lora_a");
    else if (n > 14 && !strcmp(out + n - 14, ".lora_B.weight")) snprintf(out + n - 14, cap - (n - 14), ".lora_b");
}

/* adapter/adapter_config.json in mlx-lm's schema, from the PEFT config
 * adapter_save wrote there (the same values the original reads) */
static int write_mlx_config(const char *ad, int n_layer, dlm_err *e)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/adapter_config.json", ad);
    json_t *pc = json_load_path(p, 1 << 20, e);
    if (!pc) return -1;
    json_int_t r = json_integer_value(json_object_get(pc, "r"));
    json_t *ja = json_object_get(pc, "lora_alpha"), *jd = json_object_get(pc, "lora_dropout");
    double alpha = ja ? json_number_value(ja) : (double)r, drop = jd ? json_number_value(jd) : 0.0;
    json_t *tm = json_object_get(pc, "target_modules"), *keys = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(tm, i, v) if (json_is_string(v)) json_array_append_new(keys, qualified(json_string_value(v)));
    json_t *c = json_pack("{s:s, s:i, s:{s:I, s:f, s:f, s:o}}", "fine_tune_type", "lora", "num_layers", n_layer,
                          "lora_parameters", "rank", r, "scale", r ? alpha / (double)r : alpha, "dropout", drop,
                          "keys", keys);
    json_decref(pc);
    if (!c) return err_set(e, "MemoryError", "out of memory");
    int rc = json_save_file(p, c, e);
    json_decref(c);
    return rc;
}

static int write_tensors(const lora *l, const char *ad, dlm_err *e)
{
    int cap = l->n_layer * LM_COUNT * 2, n = 0, rc = -1;
    st_out *o = calloc((size_t)(cap ? cap : 1), sizeof *o);
    char (*names)[192] = calloc((size_t)(cap ? cap : 1), sizeof *names);
    float **own = calloc((size_t)(cap ? cap : 1), sizeof *own);
    if (!o || !names || !own) { err_set(e, "MemoryError", "out of memory"); goto done; }
    int rk = l->cfg.rank;
    for (int il = 0; il < l->n_layer; il++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, il, m);
            if (!md) continue;
            for (int part = 0; part < 2; part++) {
                /* A is [r, in] and B [out, r] row-major; mlx-lm stores the
                 * transposes (the original's t().contiguous()) */
                int rows = part ? md->out : rk, cols = part ? rk : md->in;
                const float *src = l->w + (part ? md->off_b : md->off_a);
                float *t = malloc((size_t)rows * (size_t)cols * sizeof *t);
                if (!t) { err_set(e, "MemoryError", "out of memory"); goto done; }
                for (int a = 0; a < rows; a++)
                    for (int b = 0; b < cols; b++) t[(size_t)b * rows + a] = src[(size_t)a * cols + b];
                char peft[192];
                lora_tensor_name(l, il, m, part ? "lora_B" : "lora_A", peft, sizeof peft);
                mlx_key(peft, names[n], sizeof names[n]);
                own[n] = t;
                o[n] = (st_out){.name = names[n], .dtype = ST_F32, .ndim = 2, .shape = {cols, rows}, .data = t};
                n++;
            }
        }
    char p[4300];
    snprintf(p, sizeof p, "%s/adapters.safetensors", ad);
    const char *meta[] = {"format", "mlx", NULL};
    rc = st_write(p, o, n, meta, e);
done:
    for (int i = 0; own && i < n; i++) free(own[i]);
    free(own);
    free(names);
    free(o);
    return rc;
}

int export_mlx_write(const lora *l, const adapter_meta *meta, const export_mlx_opts *o, const char *dir,
                     char names[][64], int cap, int *n, dlm_err *e)
{
    *n = 0;
    if (l->embd) {
        err_set(e, "ExportError", "preflight: the adapter carries whole embed_tokens / lm_head matrices"
                " (modules_to_save, from training.cpt.embed_warmup_steps), which mlx-lm's adapter loading does not apply");
        return err_hint(e, "export it merged for another runtime: --target vllm --merged");
    }
    if (l->cfg.dora) {
        err_set(e, "ExportError", "preflight: the mlx-serve target converts LoRA adapters only, not DoRA (as the original)");
        return err_hint(e, "export it merged for another runtime: --target vllm --merged");
    }
    char ad[4200], p[4300];
    if (!fs_join(ad, sizeof ad, dir, "adapter")) return err_set(e, "ExportError", "path too long");
    /* the PEFT folder first (its config is what the conversion reads), then
     * the mlx-lm files in place of it */
    if (fs_mkdir_p(ad, e) || adapter_save(ad, l, meta, e)) return -1;
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", ad);
    if (unlink(p) != 0) return err_sys(e, "cannot remove %s", p);
    if (write_mlx_config(ad, l->n_layer, e) || write_tensors(l, ad, e) ||
        add_name(names, cap, n, "adapter/adapter_config.json", e) ||
        add_name(names, cap, n, "adapter/adapters.safetensors", e))
        return -1;
    strbuf sb = STRBUF_INIT;
    strbuf q = STRBUF_INIT;
    sb_printf(&sb, "#!/usr/bin/env bash\n# mlx-lm server launcher written by dlm %s for %s (adapter v%04d); "
                   "Apple Silicon with mlx-lm installed\nset -euo pipefail\n"
                   "SCRIPT_DIR=\"$(cd -- \"$(dirname -- \"${BASH_SOURCE[0]}\")\" && pwd)\"\n"
                   "exec python -m mlx_lm.server --model ",
              o->dlm_version, o->dlm_id, o->adapter_version);
    sb_putc(&q, '\'');
    for (const char *s = o->model_ref; *s; s++) {
        if (*s == '\'') sb_puts(&q, "'\\''");
        else sb_putc(&q, *s);
    }
    sb_putc(&q, '\'');
    sb_puts(&sb, sb_str(&q));
    sb_puts(&sb, " --adapter-path \"$SCRIPT_DIR/adapter\" --host 127.0.0.1 --port 8000 \"$@\"\n");
    int rc = -1;
    if (!fs_join(p, sizeof p, dir, "mlx_serve_launch.sh")) { err_set(e, "ExportError", "path too long"); goto done; }
    if (fs_write_atomic(p, sb.buf, sb.len, 0755, e) || add_name(names, cap, n, "mlx_serve_launch.sh", e)) goto done;
    rc = 0;
done:
    sb_free(&q);
    sb_free(&sb);
    return rc;
}
