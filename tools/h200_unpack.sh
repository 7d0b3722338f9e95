#!/usr/bin/env bash
# h200_unpack.sh PACK OUTDIR: a device call's MOECTS_PACK (tools/h200_run.sh) back into the tree,
# ready to commit and to carry into the next call. A pack split in parts (PACK.00, PACK.01, ...; PACK
# itself absent) is joined first.
#  - OUTDIR is replaced by the pack's copy (the pack holds all of it): unpacking over the old one would
#    keep a journal the device removed when its step finished, and the next call would resume it.
#  - Reports over 256 KiB are kept as NAME.gz (committed so; h200_run.sh restores NAME from NAME.gz at
#    its start); a NAME.gz whose NAME the device removed (a finished step's journal) is removed too.
#  - Prints each step's state: done (results.json, no journal), cut (journal: results kept), or absent.
# Exit: 0; 2 with one line when PACK is not a pack of OUTDIR.
set -u
pack=${1:?usage: tools/h200_unpack.sh PACK OUTDIR} out=${2:?usage: tools/h200_unpack.sh PACK OUTDIR}
out=${out%/}
name=$(basename "$out") parent=$(dirname "$out")
tmp=$(mktemp -d "$parent/.unpack.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
if [ ! -e "$pack" ] && [ -e "$pack.00" ]; then
  cat "$pack".[0-9][0-9] > "$tmp/pack.tar.gz" || exit 2
  pack=$tmp/pack.tar.gz
fi
if ! tar -tzf "$pack" 2>/dev/null | grep -q "^$name/"; then
  echo "h200_unpack: $1: not a pack of $name/ (tools/h200_run.sh with MOECTS_PACK and OUTDIR $out)" >&2
  exit 2
fi
tar -xzf "$pack" -C "$tmp" "$name" || { echo "h200_unpack: $1: tar failed" >&2; exit 2; }
find "$tmp/$name" -name '*.gz' | while read -r z; do [ -e "${z%.gz}" ] || rm -f "$z"; done
find "$tmp/$name" -type f ! -name '*.gz' -size +256k -exec gzip -f {} +
rm -rf "$out" && mv "$tmp/$name" "$out"
for d in "$out"/*/; do
  d=${d%/} s=$(basename "$d")
  if [ -e "$d/results.journal.gz" ]; then echo "$s: cut, $(zcat "$d/results.journal.gz" | wc -l) journal lines"
  elif [ -e "$d/results.json.gz" ] || [ -e "$d/results.json" ]; then echo "$s: done"
  fi
done
