#!/usr/bin/env python3
"""quant_acc.py DIR BASE RUN... — a Markdown table of each run's encoder output against BASE's (relative L2
error ||b - a|| / ||a||, max-abs error) and of its token ids against BASE's (difflib's matched ids over the
longer sequence). A run is DIR/NAME/encoder.npy (vkasr transcribe --dump) and DIR/NAME.json (--format json);
a missing or unreadable one gets a row saying so. Python standard library only."""
import array, ast, difflib, json, math, sys


def read_npy(path):
    """float32 little-endian C-order .npy: (shape, values)."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    hlen, off = (int.from_bytes(buf[8:10], "little"), 10) if buf[6] == 1 else (int.from_bytes(buf[8:12], "little"), 12)
    hdr = ast.literal_eval(buf[off:off + hlen].decode("latin1"))
    if hdr["descr"] != "<f4" or hdr["fortran_order"]:
        raise ValueError(f"{path}: {hdr['descr']}, fortran_order {hdr['fortran_order']}: expected <f4, C order")
    vals = array.array("f")
    vals.frombytes(buf[off + hlen:])
    if sys.byteorder != "little":
        vals.byteswap()
    return tuple(hdr["shape"]), vals


def read_ids(path):
    with open(path) as f:
        text = f.read()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = json.loads(text.splitlines()[0])
    return [t["id"] for t in obj.get("tokens", [])]


def main():
    d, base, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        bshape, b = read_npy(f"{d}/{base}/encoder.npy")
        bids = read_ids(f"{d}/{base}.json")
    except (OSError, ValueError, KeyError) as e:
        print(f"baseline {base} unreadable: {e}")
        return 1
    print(f"Against `{base}` (encoder [{' x '.join(map(str, bshape))}], {len(bids)} tokens):\n")
    print("| run | encoder relative error | encoder max-abs | tokens | token agreement |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in runs:
        try:
            shape, x = read_npy(f"{d}/{r}/encoder.npy")
            ids = read_ids(f"{d}/{r}.json")
        except (OSError, ValueError, KeyError) as e:
            print(f"| {r} | not measured ({type(e).__name__}: see {r}.log) | | | |")
            continue
        if shape != bshape:
            print(f"| {r} | encoder shape {shape}, baseline {bshape} | | | |")
            continue
        se = sr = mx = 0.0
        for u, v in zip(b, x):
            e = v - u
            se += e * e
            sr += u * u
            mx = max(mx, abs(e))
        rel = math.sqrt(se / sr) if sr > 0 else math.sqrt(se)
        sm = difflib.SequenceMatcher(None, bids, ids, autojunk=False)
        same = sum(m.size for m in sm.get_matching_blocks())
        longer = max(len(bids), len(ids))
        agree = same / longer if longer else 1.0
        print(f"| {r} | {rel:.3g} | {mx:.3g} | {len(ids)} | {agree:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
