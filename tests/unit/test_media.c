/* test_media — the blob store's layout, smart_resize, EXIF parsing and the
 * decoders' refusals; `test_media --ref DIR` compares image_decode and
 * proc_image with transformers (tests/ref/media/images_hf.py writes DIR;
 * tests/ref/r1301-images-hf.sh runs both). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "api/request.h"
#include "doc/doc.h"
#include "media/blob.h"
#include "media/image.h"
#include "media/preprocess.h"
#include "util/fs.h"
#include "util/hash.h"

static void test_blob(void)
{
    char ext[8];
    blob_ext("a/B.PNG", ext); CHECK_STR(ext, ".png");
    blob_ext("x.jpeg", ext); CHECK_STR(ext, ".jpeg");
    blob_ext("x.tiff", ext); CHECK_STR(ext, ".tiff");
    blob_ext("x.tif", ext); CHECK_STR(ext, ".bin");     /* the original's list has no .tif */
    blob_ext(".png", ext); CHECK_STR(ext, ".bin");      /* Path(".png").suffix is "" */
    blob_ext("noext", ext); CHECK_STR(ext, ".bin");
    const char *dir = check_tmpdir("media_blob");
    CHECK(dir != NULL);
    if (!dir) return;
    dlm_err e;
    blob_handle h;
    CHECK_INT(blob_put(dir, "abc", 3, "pic.PNG", &h, &e), 0);
    /* sha256("abc") is the FIPS 180-2 example */
    CHECK_STR(h.sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_INT(h.written, 1);
    char p[4300], want[4300];
    snprintf(want, sizeof want, "%s/blobs/ba/%s.png", dir, h.sha);
    CHECK(fs_is_file(want));
    CHECK_INT(blob_put(dir, "abc", 3, "again.png", &h, &e), 0);
    CHECK_INT(h.written, 0);   /* same bytes: nothing rewritten */
    CHECK_INT(blob_find(dir, h.sha, p, sizeof p, &e), 0);
    CHECK_STR(p, want);
    CHECK_INT(blob_find(dir, "00ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015", p, sizeof p, &e), 1);
    CHECK_INT(blob_find(dir, "BA78", p, sizeof p, &e), -1);
}

/* section ids as the original's Section.section_id (values from Python's hashlib) */
static void test_section_id(void)
{
    static const char text[] = "---\ndlm_id: 01JD0000000000000000000000\ndlm_version: 15\nbase_model: tiny\n---\n"
                               "::image path=\"figures/x.png\" alt=\"x\"::\nA caption.\n";
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", text, sizeof text - 1, &e);
    CHECK(d != NULL);
    if (!d) return;
    int i = doc_nsections(d) - 1;
    CHECK_INT(doc_section_at(d, i)->type, DOC_IMAGE);
    CHECK_STR(doc_section_at(d, i)->id, "c0c529ed69f387fb");   /* before ingestion: the path alone */
    doc_set_media_blob(d, i, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_STR(doc_section_at(d, i)->id, "cbdc93066aa1963a");
    doc_free(d);
}

static void test_smart_resize(void)
{
    /* values from transformers' smart_resize (Python) */
    int oh, ow;
    dlm_err e;
    CHECK_INT(qwen2vl_smart_resize(1, 1, 28, 3136, 12845056, &oh, &ow, &e), 0);
    CHECK_INT(oh, 56); CHECK_INT(ow, 56);
    CHECK_INT(qwen2vl_smart_resize(600, 512, 28, 3136, 50176, &oh, &ow, &e), 0);
    CHECK_INT(oh, 224); CHECK_INT(ow, 196);
    CHECK_INT(qwen2vl_smart_resize(42, 70, 28, 3136, 12845056, &oh, &ow, &e), 0);   /* 1.5 and 2.5 round to even */
    CHECK_INT(oh, 56); CHECK_INT(ow, 56);
    CHECK(qwen2vl_smart_resize(1, 201, 28, 3136, 12845056, &oh, &ow, &e) != 0);
}

static void test_refusals(void)
{
    dlm_err e;
    image_rgb im;
    CHECK(image_decode((const uint8_t *)"hello", 5, &im, &e) != 0);
    CHECK(strstr(e.msg, "not an image") != NULL);
    /* a PNG header claiming 100000 x 100000: refused from the header */
    static const uint8_t bomb[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                   0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 2, 0, 0, 0, 0x27, 0x30, 0x9c, 0x9f,
                                   0, 0, 0, 0, 'I', 'D', 'A', 'T'};   /* IDAT: the header is read up to here */
    CHECK(image_decode(bomb, sizeof bomb, &im, &e) != 0);
    CHECK_MSG(strstr(e.msg, "over the bound") != NULL, "%s", e.msg);
    /* a GIF screen of 65535 x 65535, and a 1x1 screen whose frame claims 65535 x 65535 */
    static const uint8_t gbomb[] = {'G', 'I', 'F', '8', '9', 'a', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, ';'};
    CHECK(image_decode(gbomb, sizeof gbomb, &im, &e) != 0);
    CHECK_MSG(strstr(e.msg, "over the bound") != NULL, "%s", e.msg);
    static const uint8_t gframe[] = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 255, 255, 255,
                                     ',', 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 2, 2, 0x4c, 0x01, 0, ';'};
    CHECK(image_decode(gframe, sizeof gframe, &im, &e) != 0);
    CHECK_MSG(strstr(e.msg, "does not cover the screen") != NULL, "%s", e.msg);
    /* EXIF: big- and little-endian IFD0 with Orientation */
    static const uint8_t mm[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0};
    static const uint8_t ii[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0};
    CHECK_INT(image_exif_orientation(mm, sizeof mm), 6);
    CHECK_INT(image_exif_orientation(ii, sizeof ii), 8);
    CHECK_INT(image_exif_orientation(ii, 12), 0);   /* cut short: no orientation */
}

/* the API's OpenAI image parts: an http URL is refused as a network fetch
 * (naming the part), a base64 data: URL decoded into the request (its
 * message and part kept), images only in user messages */
static void test_api_image_parts(void)
{
    static const char http[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                               "\"text\":\"hi\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/a.png\"}}]}]}";
    static const char data[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
                               "\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}]}";
    api_request r;
    api_error err;
    CHECK(api_request_parse(API_CHAT, http, sizeof http - 1, &r, &err) != 0);
    CHECK_INT(err.status, 400);
    CHECK_MSG(strstr(err.message, "[1].image_url: an http(s) URL would be a network fetch") != NULL, "%s",
              err.message);
    CHECK(api_request_parse(API_CHAT, data, sizeof data - 1, &r, &err) == 0);
    CHECK_INT(r.n_images, 1);
    CHECK_INT(r.images[0].n, 8);
    CHECK(!memcmp(r.images[0].data, "\x89PNG\r\n\x1a\n", 8));
    CHECK_STR(r.msgs[0].content, "");
    api_request_free(&r);
    static const char two[] = "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":["
                              "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}]}";
    CHECK(api_request_parse(API_CHAT, two, sizeof two - 1, &r, &err) == 0);   /* a conversation with images */
    CHECK(r.n_images == 1 && r.images[0].msg == 1 && r.images[0].part == 0);
    api_request_free(&r);
    static const char asst[] = "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"image_url\","
                               "\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]},{\"role\":\"user\",\"content\":\"q\"}]}";
    CHECK(api_request_parse(API_CHAT, asst, sizeof asst - 1, &r, &err) != 0);
    CHECK_MSG(strstr(err.message, "images are taken in user messages only") != NULL, "%s", err.message);
    static const char raw[] = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
                              "\"image_url\":{\"url\":\"data:image/png,abc\"}}]}]}";
    CHECK(api_request_parse(API_CHAT, raw, sizeof raw - 1, &r, &err) != 0);
    CHECK_MSG(strstr(err.message, "must be base64") != NULL, "%s", err.message);
}

/* ---- --ref DIR ------------------------------------------------------------------------ */

static float *read_f32(const char *dir, const char *name, const char *ext, size_t n)
{
    char p[4096], *buf = NULL;
    size_t len = 0;
    dlm_err e;
    snprintf(p, sizeof p, "%s/%s%s", dir, name, ext);
    if (fs_read_all(p, 1u << 30, &buf, &len, &e) || len != n * sizeof(float)) {
        fprintf(stderr, "%s: %s (%zu bytes, expected %zu)\n", p, buf ? "wrong size" : e.msg, len, n * sizeof(float));
        free(buf);
        return NULL;
    }
    return (float *)buf;
}

static double max_abs(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m) m = d;
    }
    return m;
}

static void cmp(const char *dir, const char *name, const char *ext, const image_rgb *im, const proc_cfg *c, int gh, int gw)
{
    dlm_err e;
    proc_out po;
    if (proc_image(im, c, &po, &e)) { CHECK_MSG(0, "%s%s: %s", name, ext, e.msg); return; }
    size_t n = (size_t)po.n_rows * po.row_len;
    if (gh) {
        CHECK_MSG(po.grid_thw[0] == 1 && po.grid_thw[1] == gh && po.grid_thw[2] == gw, "%s%s: grid %d,%d,%d vs 1,%d,%d",
                  name, ext, po.grid_thw[0], po.grid_thw[1], po.grid_thw[2], gh, gw);
        n = (size_t)gh * gw * 1176;
        if ((size_t)po.n_rows * po.row_len != n) { proc_out_free(&po); return; }
    }
    float *want = read_f32(dir, name, ext, n);
    CHECK_MSG(want != NULL, "%s%s unreadable", name, ext);
    if (want) {
        double d = max_abs(po.pixels, want, n);
        CHECK_MSG(d <= 1e-5, "%s%s: max |diff| %.3g > 1e-5", name, ext, d);
        printf("  %-22s %-5s max|diff| %.3g\n", name, ext, d);
    }
    free(want);
    proc_out_free(&po);
}

static int ref_mode(const char *dir)
{
    char mp[4096], *man = NULL;
    size_t ml;
    dlm_err e;
    snprintf(mp, sizeof mp, "%s/manifest.txt", dir);
    if (fs_read_all(mp, 1 << 20, &man, &ml, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int cases = 0;
    for (char *line = strtok(man, "\n"); line; line = strtok(NULL, "\n")) {
        char name[256], file[256];
        int h, w, qh, qw, qsh, qsw;
        char *data = NULL;
        size_t n = 0;
        image_rgb im;
        if (sscanf(line, "ERR %255s %255s", name, file) == 2) {
            snprintf(mp, sizeof mp, "%s/%s", dir, file);
            CHECK(fs_read_all(mp, 1u << 30, &data, &n, &e) == 0);
            int rc = image_decode((const uint8_t *)data, n, &im, &e);
            CHECK_MSG(rc != 0, "%s: PIL refuses it, dlm decoded it", name);
            if (!rc) image_free(&im);
            else printf("  %-22s refused: %s\n", name, e.msg);
            free(data);
            cases++;
            continue;
        }
        if (sscanf(line, "%255s %255s %d %d %d %d %d %d", name, file, &h, &w, &qh, &qw, &qsh, &qsw) != 8) {
            CHECK_MSG(0, "bad manifest line: %s", line);
            continue;
        }
        snprintf(mp, sizeof mp, "%s/%s", dir, file);
        CHECK(fs_read_all(mp, 1u << 30, &data, &n, &e) == 0);
        int rc = image_decode((const uint8_t *)data, n, &im, &e);
        free(data);
        CHECK_MSG(rc == 0, "%s: %s", name, e.msg);
        if (rc) continue;
        cases++;
        CHECK_MSG(im.w == w && im.h == h, "%s: %dx%d, expected %dx%d", name, im.w, im.h, w, h);
        if (im.w != w || im.h != h) { image_free(&im); continue; }
        char *rgb = NULL;
        size_t rl = 0;
        snprintf(mp, sizeof mp, "%s/%s.rgb", dir, name);
        CHECK(fs_read_all(mp, 1u << 30, &rgb, &rl, &e) == 0 && rl == (size_t)w * h * 3);
        size_t bad = 0, first = 0;
        for (size_t i = 0; rgb && i < rl; i++)
            if ((uint8_t)rgb[i] != im.px[i] && !bad++) first = i;
        CHECK_MSG(bad == 0, "%s: %zu of %zu RGB bytes differ from PIL (first at %zu: %u vs %u)", name, bad, rl, first,
                  im.px[first], rgb ? (uint8_t)rgb[first] : 0);
        free(rgb);
        cmp(dir, name, ".sig", &im, &PROC_PALIGEMMA_224, 0, 0);
        proc_cfg bl = PROC_PALIGEMMA_224;
        bl.resample = PIL_BILINEAR;
        bl.convert_rgb = 1;   /* the class default: the script passes no do_convert_rgb */
        bl.height = 37;
        bl.width = 53;
        bl.rescale_factor = 1.0 / 255;
        cmp(dir, name, ".bil", &im, &bl, 0, 0);
        cmp(dir, name, ".qw", &im, &PROC_QWEN2_VL, qh, qw);
        proc_cfg qs = PROC_QWEN2_VL;
        qs.max_pixels = 50176;
        cmp(dir, name, ".qws", &im, &qs, qsh, qsw);
        image_free(&im);
    }
    free(man);
    printf("test_media --ref: %d cases\n", cases);
    CHECK(cases >= 40);
    return check_done();
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    test_blob();
    test_section_id();
    test_smart_resize();
    test_refusals();
    test_api_image_parts();
    return check_done();
}
