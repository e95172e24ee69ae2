"""Reference pixel values for dlm's image decoding and processors (r1301).

Writes into DIR a set of images (real photos from Debian's
python-matplotlib-data, re-encoded in each format, and synthetic edge cases)
and, for each, what transformers gives:

  NAME.rgb     uint8 H*W*3: transformers.image_utils.load_image(path)
               (PIL.Image.open, ImageOps.exif_transpose, convert("RGB"))
  NAME.sig     float32 [3][224][224]: SiglipImageProcessorPil with
               google/paligemma-3b-mix-224's preprocessor_config.json
  NAME.qw      float32 [rows][1176]: Qwen2VLImageProcessorPil with
               Qwen/Qwen2-VL-2B-Instruct's (min 3136, max 12845056 pixels)
  NAME.qws     the same with max_pixels 50176, so that every photo is
               scaled down (the smart_resize beta branch)
  NAME.bil     float32 [3][37][53]: the SigLIP processor with BILINEAR to 37x53

manifest.txt: one line per case, "NAME FILE H W QH QW QSH QSW" (image size,
then image_grid_thw's h and w for the two Qwen2-VL configs), or
"ERR NAME FILE" for a file PIL refuses (dlm must refuse it too).
The processors are the PIL-backend classes (the slow ones), called on the
PIL image load_image returns.
"""
import io, os, shutil, struct, sys, zlib

import numpy as np
from PIL import Image, ImageOps
from transformers.image_utils import load_image
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

out = sys.argv[1]
PHOTOS = "/usr/share/matplotlib/mpl-data/sample_data"
rng = np.random.default_rng(1301)

sig = SiglipImageProcessorPil(do_convert_rgb=None, do_normalize=True, do_rescale=True, do_resize=True,
                              image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], resample=3,
                              rescale_factor=0.00392156862745098, size={"height": 224, "width": 224})
bil = SiglipImageProcessorPil(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], resample=2,
                              size={"height": 37, "width": 53})
qw = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2, merge_size=2,
                              image_mean=[0.48145466, 0.4578275, 0.40821073],
                              image_std=[0.26862954, 0.26130258, 0.27577711])
qws = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=50176)

manifest = []


def exif_orient(o):
    ex = Image.Exif()
    ex[0x0112] = o
    return ex.tobytes()


def case(name, fname):
    path = os.path.join(out, fname)
    try:
        im = load_image(path)
        rgb = np.asarray(im, dtype=np.uint8)
    except Exception as e:  # PIL refuses it: so must dlm
        manifest.append(f"ERR {name} {fname}")
        return
    rgb.tofile(os.path.join(out, name + ".rgb"))
    s = sig(im, return_tensors="np")["pixel_values"][0].astype(np.float32)
    assert s.shape == (3, 224, 224)
    s.tofile(os.path.join(out, name + ".sig"))
    bil(im, return_tensors="np")["pixel_values"][0].astype(np.float32).tofile(os.path.join(out, name + ".bil"))
    grids = []
    for proc, ext in ((qw, ".qw"), (qws, ".qws")):
        r = proc(im, return_tensors="np")
        r["pixel_values"].astype(np.float32).tofile(os.path.join(out, name + ext))
        t, gh, gw = r["image_grid_thw"][0]
        assert t == 1 and r["pixel_values"].shape == (gh * gw, 1176)
        grids += [gh, gw]
    manifest.append(f"{name} {fname} {rgb.shape[0]} {rgb.shape[1]} {grids[0]} {grids[1]} {grids[2]} {grids[3]}")


def save(im, fname, **kw):
    im.save(os.path.join(out, fname), **kw)
    return fname


# ---- real photos, and the same pixels in every format -----------------------------
shutil.copy(os.path.join(PHOTOS, "grace_hopper.jpg"), os.path.join(out, "hopper.jpg"))
case("hopper_jpg", "hopper.jpg")
shutil.copy(os.path.join(PHOTOS, "Minduka_Present_Blue_Pack.png"), os.path.join(out, "minduka.png"))
case("minduka_png", "minduka.png")
shutil.copy(os.path.join(PHOTOS, "logo2.png"), os.path.join(out, "logo2.png"))
case("logo2_png", "logo2.png")
hop = Image.open(os.path.join(PHOTOS, "grace_hopper.jpg")).convert("RGB")
small = hop.resize((151, 177), Image.Resampling.LANCZOS)
case("hopper_png", save(small, "hopper.png"))
case("hopper_webp", save(small, "hopper.webp", quality=80))
case("hopper_webp_lossless", save(small, "hopper_ll.webp", lossless=True))
case("hopper_bmp", save(small, "hopper.bmp"))
case("hopper_tiff", save(small, "hopper.tiff"))
case("hopper_tiff_lzw", save(small, "hopper_lzw.tiff", compression="tiff_lzw"))
case("hopper_gif", save(small.quantize(200), "hopper.gif"))
case("hopper_q30_jpg", save(small, "hopper_q30.jpg", quality=30))
case("hopper_444_jpg", save(small, "hopper_444.jpg", quality=90, subsampling=0))
case("hopper_prog_jpg", save(small, "hopper_prog.jpg", progressive=True))
case("hopper_gray_jpg", save(small.convert("L"), "hopper_gray.jpg"))
case("hopper_cmyk_jpg", save(small.convert("CMYK"), "hopper_cmyk.jpg"))
for o in range(1, 9):
    case(f"hopper_exif{o}_jpg", save(small.crop((0, 0, 151, 120)), f"hopper_exif{o}.jpg", exif=exif_orient(o)))
case("hopper_exif6_png", save(small.crop((0, 0, 151, 120)), "hopper_exif6.png", exif=exif_orient(6)))
# orientation where Pillow's getexif also looks: a WebP EXIF chunk, XMP (JPEG, PNG, WebP), PNG's
# "Raw profile type exif" text chunk, and EXIF without Orientation next to XMP with one
from PIL import PngImagePlugin
crop = small.crop((0, 0, 151, 120))
xmp = lambda o: ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
                 f'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="{o}"/></rdf:RDF></x:xmpmeta>')
case("webp_exif6", save(crop, "exif6.webp", exif=exif_orient(6), lossless=True))
case("webp_xmp8", save(crop, "xmp8.webp", xmp=xmp(8).encode(), lossless=True))
case("jpeg_xmp3", save(crop, "xmp3.jpg", xmp=xmp(3).encode()))
noor = Image.Exif(); noor[0x010F] = "dlm"
case("jpeg_exif_noorient_xmp5", save(crop, "xmp5.jpg", exif=noor.tobytes(), xmp=xmp(5).encode()))
case("jpeg_exif1_xmp5", save(crop, "exif1xmp5.jpg", exif=exif_orient(1), xmp=xmp(5).encode()))
pi = PngImagePlugin.PngInfo(); pi.add_itxt("XML:com.adobe.xmp", xmp(7))
case("png_xmp7", save(crop, "xmp7.png", pnginfo=pi))
raw = exif_orient(8)
pi = PngImagePlugin.PngInfo(); pi.add_text("Raw profile type exif", f"\nexif\n{len(raw):8d}\n" + raw.hex())
case("png_rawprofile8", save(crop, "raw8.png", pnginfo=pi))

# ---- synthetic edge cases -----------------------------------------------------------
noise = lambda h, w, c: rng.integers(0, 256, (h, w, c), dtype=np.uint8)
case("one_px", save(Image.fromarray(noise(1, 1, 3)), "one.png"))
case("odd_37x23", save(Image.fromarray(noise(23, 37, 3)), "odd.png"))
case("tall_5x300", save(Image.fromarray(noise(300, 5, 3)), "tall.png"))
case("rgba", save(Image.fromarray(noise(41, 29, 4), "RGBA"), "rgba.png"))
case("la", save(Image.fromarray(noise(17, 19, 2), "LA"), "la.png"))
case("gray", save(Image.fromarray(noise(31, 33, 1)[:, :, 0], "L"), "gray.png"))
case("bilevel", save(Image.fromarray(noise(21, 27, 1)[:, :, 0] > 127), "bilevel.png"))
case("gray4", save(Image.fromarray(noise(13, 15, 1)[:, :, 0]), "gray4.png", bits=4))
pal = Image.fromarray(noise(29, 31, 3)).quantize(16)
case("palette", save(pal, "palette.png"))
case("palette_trns", save(pal, "palette_trns.png", transparency=3))
case("palette_bmp", save(pal, "palette.bmp"))
case("gif_trns", save(pal, "trns.gif", transparency=3, interlace=0))
case("palette_tiff", save(pal, "palette.tiff"))
g16 = Image.fromarray(rng.integers(0, 65536, (19, 23), dtype=np.uint16).astype(np.int32), "I").convert("I;16")
case("gray16", save(g16, "gray16.png"))
g16lo = Image.fromarray(rng.integers(0, 300, (19, 23), dtype=np.uint16).astype(np.int32), "I").convert("I;16")
case("gray16_low", save(g16lo, "gray16_low.png"))

case("rgba_webp", save(Image.fromarray(noise(21, 23, 4), "RGBA"), "rgba.webp", lossless=True))
case("rgba_bmp", save(Image.fromarray(noise(21, 23, 4), "RGBA"), "rgba.bmp"))
case("gray_tiff", save(Image.fromarray(noise(21, 23, 1)[:, :, 0], "L"), "gray.tiff"))


def png_chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)


def raw_png(w, h, ctype, depth, rows, interlace=0):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)) +
            png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


# 16-bit RGB (Pillow keeps the high byte) and an Adam7 interlaced 8-bit RGB, written by hand
px16 = rng.integers(0, 65536, (7, 9, 3), dtype=np.uint16).astype(">u2")
open(os.path.join(out, "rgb16.png"), "wb").write(raw_png(9, 7, 2, 16, b"".join(b"\0" + r.tobytes() for r in px16)))
case("rgb16", "rgb16.png")
img = noise(33, 35, 3)
adam7 = b""
for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
    sub = img[y0::dy, x0::dx]
    if sub.size:
        adam7 += b"".join(b"\0" + r.tobytes() for r in sub)
open(os.path.join(out, "interlaced.png"), "wb").write(raw_png(35, 33, 2, 8, adam7, interlace=1))
case("interlaced", "interlaced.png")
# errors PIL refuses: a truncated PNG and JPEG
data = open(os.path.join(out, "hopper.png"), "rb").read()
open(os.path.join(out, "trunc.png"), "wb").write(data[: len(data) // 2])
case("trunc_png", "trunc.png")
data = open(os.path.join(out, "hopper.jpg"), "rb").read()
open(os.path.join(out, "trunc.jpg"), "wb").write(data[: len(data) // 2])
case("trunc_jpg", "trunc.jpg")

open(os.path.join(out, "manifest.txt"), "w").write("\n".join(manifest) + "\n")
print(f"images_hf: {len(manifest)} cases ({sum(m.startswith('ERR') for m in manifest)} refused by PIL)")
