"""Figures and display(): images of the active call go to the host as image
frames, attached to the run_python result after the text.

matplotlib is never imported here: an import hook patches pyplot.show when
user code imports pyplot, and figures still open when a cell ends are sent
only if pyplot was imported. Caps: at most limits.maxImages images per call
and limits.maxImageBytes bytes per image; the others are saved under
/workspace/.bridge/ and reported in the exec reply's "saved" list.

display() and a cell's final value also find the images inside MCP tool
results (lists, tuples, dicts, content blocks), and their text shows a
placeholder instead of any base64 (see _walk).
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
_RT = None  # mcp.runtime, set by install()


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


class _AfterImport:
    """Meta path finder that calls patch(module) once the module name is
    imported (executed), before the importer sees it; every other import
    passes through untouched."""

    def __init__(self, name, patch):
        self._name, self._patch = name, patch

    def find_spec(self, name, path, target=None):
        if name != self._name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self._patch)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def after_import(name, patch):
    """Calls patch(module) when module name is first imported, or at once
    when it already is."""
    mod = sys.modules.get(name)
    if mod is not None:
        patch(mod)
        return
    sys.meta_path.insert(0, _AfterImport(name, patch))


def _patch_pyplot(module):
    module.show = _show


def install(images, prune, rt):
    """Keeps images (this session's Images), prune (capture._prune) and rt
    (mcp.runtime, whose Image, Resource and block helpers display() knows)."""
    global IMAGES, _PRUNE, _RT
    IMAGES, _PRUNE, _RT = images, prune, rt
    os.environ.setdefault("MPLBACKEND", "Agg")
    after_import("matplotlib.pyplot", _patch_pyplot)


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


def _is_image_mime(mime):
    return isinstance(mime, str) and mime.startswith("image/")


def _image_block(obj):
    """(bytes, mime) of an MCP image content dict, an embedded-resource dict
    with an image MIME type, a runtime.Image or an image runtime.Resource;
    None otherwise. The bytes decide the type when they are a known format.
    Invalid base64 raises ValueError."""
    rt = _RT
    if rt is None:
        return None
    if isinstance(obj, dict):
        found = rt._block_data(obj)
        if found is None:
            return None
        holder, key, mime = found
        if obj.get("type") == "audio" or (obj.get("type") == "resource" and not _is_image_mime(mime)):
            return None
        data = base64.b64decode(holder[key], validate=True)
        return data, _sniff(data) or (mime if _is_image_mime(mime) else "image/png")
    if isinstance(obj, rt.Image) or (isinstance(obj, rt.Resource) and obj.data is not None
                                     and _is_image_mime(obj.mime_type)):
        data = bytes(obj.data)
        return data, _sniff(data) or obj.mime_type or "image/png"
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


def _table(obj):
    """The markdown table of a pandas DataFrame or Series, else None."""
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(obj, pd.Series):
            obj = obj.to_frame()
        if isinstance(obj, pd.DataFrame):
            return _markdown_table(obj)
    return None


def _text_of(obj):
    table = _table(obj)
    if table is not None:
        return table
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


def _show_image(obj):
    """Attaches obj and returns True when obj is one image of a kind
    display() knows; False otherwise."""
    if _is_figure(obj):
        try:
            IMAGES.emit(_figure_png(obj), "image/png")
        finally:
            plt = sys.modules.get("matplotlib.pyplot")
            if plt is not None:
                plt.close(obj)
        return True
    if _is_pil(obj):
        IMAGES.emit(_pil_png(obj), "image/png")
        return True
    if isinstance(obj, (bytes, bytearray, memoryview)):
        mime = _sniff(obj)
        if mime is not None:
            IMAGES.emit(bytes(obj), mime)
            return True
    block = _image_block(obj)
    if block is None:
        block = _rich_image(obj)
    if block is not None:
        IMAGES.emit(*block)
        return True
    return False


# --- images inside results ---------------------------------------------------

WALK_NODES = 100000  # items one walk visits at most: a huge value costs a bounded time
WALK_DEPTH = 50
_ATOMS = (str, int, float, bool, type(None), bytes, complex)


def _walk(obj, found, rich, budget, depth=0):
    """obj as it should be shown: obj itself, or a plain copy of a list,
    tuple or dict in which every MCP binary block (image, audio, resource
    blob) shows a placeholder instead of its base64. Appends every image in
    obj to found, in order: runtime.Image, image blocks, image resources,
    and with rich, matplotlib figures and PIL images too."""
    budget[0] -= 1
    if type(obj) in _ATOMS or budget[0] < 0 or depth > WALK_DEPTH:
        return obj
    rt = _RT
    if isinstance(obj, (rt.Image, rt.Resource)):
        if isinstance(obj, rt.Image) or (obj.data is not None and _is_image_mime(obj.mime_type)):
            found.append(obj)
        return obj  # their repr has no base64
    if rich and (_is_figure(obj) or _is_pil(obj)):
        found.append(obj)
        return obj
    if isinstance(obj, dict):
        block = rt._block_data(obj) if "type" in obj else None
        if block is not None:
            kind = obj.get("type")
            if kind == "image" or (kind == "resource" and _is_image_mime(block[2])):
                found.append(obj)
            return rt._redacted_block(obj, block)
        # A raw CallToolResult may repeat its content blocks as structured
        # content (server-filesystem's read_media_file does): each image is
        # attached once, from content.
        raw = isinstance(obj.get("content"), list) and "structuredContent" in obj
        out, changed = {}, False
        for k, v in obj.items():
            out[k] = w = _walk(v, [] if raw and k == "structuredContent" else found, rich, budget, depth + 1)
            changed = changed or w is not v
        return out if changed else obj
    if isinstance(obj, (list, tuple)):
        out = [_walk(v, found, rich, budget, depth + 1) for v in obj]
        if any(a is not b for a, b in zip(out, obj)):
            return out if isinstance(obj, list) else tuple(out)
    return obj


def _show_found(found):
    for item in found:
        try:
            _show_image(item)
        except ValueError as e:  # binascii.Error: a block's data is not base64
            sys.stderr.write("display: an image was not attached: its data is not valid base64 (%s)\n" % e)


def final_repr(value):
    """The text of a cell's final value: its repr, with a placeholder for
    each MCP image, audio or blob in it; the MCP images are attached as
    display() would. A pandas DataFrame or Series is the markdown table
    display() prints. Figures and PIL images are left to display() (open
    figures are sent when the cell ends anyway)."""
    if type(value) in _ATOMS:
        return repr(value)
    table = _table(value)
    if table is not None:
        return table
    found = []
    shown = _walk(value, found, False, [WALK_NODES])
    _show_found(found)
    return repr(shown)


def display(*objs):
    """Shows each object to the user, like IPython's display(): matplotlib
    figures (closed afterwards), PIL images, PNG/JPEG/GIF/WebP/SVG bytes, MCP
    image content dicts, image resources and runtime.Image become images of
    this call's result; lists, tuples and dicts (MCP results) are searched
    for them. Anything else is printed as text (a DataFrame as a markdown
    table), base64 shown as a placeholder like <image/png 1.2 KB>."""
    for obj in objs:
        if _show_image(obj):
            continue
        found = []
        shown = _walk(obj, found, True, [WALK_NODES])
        _show_found(found)
        text = _text_of(shown)
        if len(text) > TEXT_CAP:
            text = text[:TEXT_CAP] + "\n[... %d characters omitted by display()]" % (len(text) - TEXT_CAP)
        print(text)
