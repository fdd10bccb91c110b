"""Figures and display(): images of the active call go to the host as image
frames, attached to the run_python result after the text.

matplotlib is never imported here: an import hook patches pyplot.show when
user code imports pyplot, and figures still open when a cell ends are sent
only if pyplot was imported. Caps: at most limits.maxImages images per call
and limits.maxImageBytes bytes per image; the others are saved under
/workspace/.bridge/ and reported in the exec reply's "saved" list.
"""
import base64
import os
import sys
import threading

SAVE_DIR = "/workspace/.bridge"
KEEP_FILES = 20
SAVE_CAP = 32 << 20  # one saved image; together they stay within SAVE_BUDGET
SAVE_BUDGET = 64 << 20
TEXT_CAP = 20000  # characters of one display()ed text
TABLE_ROWS = 20
TABLE_COLS = 20

_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp", "image/svg+xml": "svg"}


class Images:
    """The images of the active call. Thread-safe: display() may run in any thread."""

    def __init__(self, link, max_images, max_bytes):
        self.link = link
        self.max_images = max_images
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.call = None

    def begin(self, call, n):
        with self.lock:
            self.call, self.n, self.made, self.sent, self.saved = call, n, 0, 0, []

    def end(self):
        """Ends the call and returns its saved-image records."""
        with self.lock:
            saved, self.call = self.saved if self.call is not None else [], None
            return saved

    def emit(self, data, mime):
        """Attaches one image (bytes) to the active call, or saves it when over a cap."""
        with self.lock:
            if self.call is None:
                return
            self.made += 1
            if self.sent >= self.max_images:
                self._save(data, mime, "count")
                return
            if len(data) > self.max_bytes:
                self._save(data, mime, "bytes")
                return
            self.sent += 1
            call = self.call
        self.link.notify("image", {"call": call, "mimeType": mime, "data": base64.b64encode(data).decode("ascii")})

    def _save(self, data, mime, reason):
        rec = {"path": "", "bytes": len(data), "reason": reason}
        path = "%s/image-%d-%d.%s" % (SAVE_DIR, self.n, self.made, _EXT.get(mime, "bin"))
        try:
            if len(data) > SAVE_CAP:
                raise OSError("over the %d MiB limit for saved images" % (SAVE_CAP >> 20))
            os.makedirs(SAVE_DIR, exist_ok=True)
            _PRUNE(SAVE_DIR, KEEP_FILES - 1, SAVE_BUDGET - len(data), "image-", "")
            with open(path, "wb") as f:
                f.write(data)
            rec["path"] = path
        except OSError as e:
            rec["error"] = e.strerror or str(e)
        self.saved.append(rec)


IMAGES = None  # set by install()
_PRUNE = None  # capture.py's _prune(directory, keep, budget, prefix, suffix)


# --- matplotlib ------------------------------------------------------------

def _figure_png(fig):
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def flush_figures():
    """Sends every open pyplot figure in creation order and closes it; a no-op
    unless user code imported matplotlib.pyplot."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    managers = sorted(helpers.Gcf.get_all_fig_managers(), key=lambda m: m.num) if helpers else []
    for m in managers:
        fig = m.canvas.figure
        try:
            IMAGES.emit(_figure_png(fig), "image/png")
        except Exception as e:
            sys.stderr.write("figure %s could not be rendered: %s: %s\n" % (m.num, type(e).__name__, e))
        finally:
            plt.close(fig)


def _show(*args, **kwargs):
    """pyplot.show(): sends the open figures as images and closes them."""
    flush_figures()


class _PyplotHook:
    """Meta path finder that patches matplotlib.pyplot.show once pyplot is
    imported; every other import passes through untouched."""

    def find_spec(self, name, path, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.show = _show

    def __getattr__(self, name):
        return getattr(self._loader, name)


def install(images, prune):
    global IMAGES, _PRUNE
    IMAGES, _PRUNE = images, prune
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.meta_path.insert(0, _PyplotHook())


# --- display() -------------------------------------------------------------

def _sniff(data):
    head = bytes(data[:512])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"GIF87a") or head.startswith(b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    text = head.lstrip().lower()
    if text.startswith(b"<svg") or (text.startswith(b"<?xml") and b"<svg" in text):
        return "image/svg+xml"
    return None


def _is_figure(obj):
    mod = type(obj).__module__ or ""
    return mod.startswith("matplotlib.") and hasattr(obj, "savefig") and hasattr(obj, "canvas")


def _is_pil(obj):
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(obj, pil.Image)


def _pil_png(img):
    import io
    if img.mode not in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
        img = img.convert("RGBA" if "A" in img.mode else "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _image_block(obj):
    """(bytes, mime) of an MCP image content dict or a runtime.Image; None
    otherwise. The bytes decide the type when they are a known format."""
    if isinstance(obj, dict) and obj.get("type") == "image" and isinstance(obj.get("data"), str):
        data = base64.b64decode(obj["data"], validate=True)
        return data, _sniff(data) or obj.get("mimeType") or "image/png"
    rt = sys.modules.get("mcp.runtime")
    if rt is not None and isinstance(obj, getattr(rt, "Image", ())):
        return bytes(obj.data), _sniff(obj.data) or obj.mime_type or "image/png"
    return None


def _markdown_table(df):
    rows, cols = df.shape
    sub = df.iloc[:TABLE_ROWS, :TABLE_COLS]

    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")

    names = [""] + [cell(c) for c in sub.columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for idx, row in zip(sub.index, sub.itertuples(index=False)):
        lines.append("| " + " | ".join([cell(idx)] + [cell(v) for v in row]) + " |")
    if rows > TABLE_ROWS or cols > TABLE_COLS:
        lines.append("(%d rows x %d columns; showing %d x %d)" % (rows, cols, sub.shape[0], sub.shape[1]))
    return "\n".join(lines)


def _text_of(obj):
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(obj, pd.Series):
            obj = obj.to_frame()
        if isinstance(obj, pd.DataFrame):
            return _markdown_table(obj)
    md = getattr(type(obj), "_repr_markdown_", None)
    if md is not None:
        text = md(obj)
        if isinstance(text, str):
            return text
    return repr(obj)


def _rich_image(obj):
    """(bytes, mime) from IPython-style _repr_png_/_repr_jpeg_/_repr_svg_ hooks."""
    for hook, mime in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"), ("_repr_svg_", "image/svg+xml")):
        fn = getattr(type(obj), hook, None)
        if fn is None:
            continue
        data = fn(obj)
        if isinstance(data, str):
            data = data.encode("utf-8") if mime == "image/svg+xml" else base64.b64decode(data)
        if data:
            return bytes(data), _sniff(data) or mime
    return None


def display(*objs):
    """Shows each object to the user, like IPython's display(): matplotlib
    figures (closed afterwards), PIL images, PNG/JPEG/GIF/WebP/SVG bytes, MCP
    image content dicts and runtime.Image become images of this call's
    result; anything else is printed as text (a DataFrame as a markdown
    table)."""
    for obj in objs:
        if _is_figure(obj):
            try:
                IMAGES.emit(_figure_png(obj), "image/png")
            finally:
                plt = sys.modules.get("matplotlib.pyplot")
                if plt is not None:
                    plt.close(obj)
            continue
        if _is_pil(obj):
            IMAGES.emit(_pil_png(obj), "image/png")
            continue
        if isinstance(obj, (bytes, bytearray, memoryview)):
            mime = _sniff(obj)
            if mime is not None:
                IMAGES.emit(bytes(obj), mime)
                continue
        block = _image_block(obj)
        if block is None:
            block = _rich_image(obj)
        if block is not None:
            IMAGES.emit(*block)
            continue
        text = _text_of(obj)
        if len(text) > TEXT_CAP:
            text = text[:TEXT_CAP] + "\n[... %d characters omitted by display()]" % (len(text) - TEXT_CAP)
        print(text)
