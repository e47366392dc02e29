#!/usr/bin/env bash
# cli_layering.sh - dependencies between the files of lib/ run one way: no
# two files (no circle of files) call each other.  A lower file never calls
# back into the one that uses it (docs/architecture.md, "Layering").  The
# same holds for the files of the QEMU plugin (agents/qemu/).
#
# Read from the objects of libbtr (build/CMakeFiles/btr_objs.dir/lib/**.o)
# and of the plugin (build/agents/qemu/CMakeFiles/btr-qemu.dir/*.o), each
# set on its own: file A depends on file B when A leaves a symbol (a
# function or a variable) undefined that B defines (nm).  Every circle of
# such dependencies is a failure, listed with the
# symbols that close it.  A first check proves the checker finds a circle,
# on two tiny objects that call each other.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Known circles, as "A B A B ..." pairs of edges left out of the graph: none.
exceptions=""

# circles DIR [SRC]: prints every circle among the objects below DIR (only
# those whose source is still in SRC, when given), one line per edge inside
# it ("circle N: a.c -> b.c (symbol)"); nothing when there is none.
circles() {
	local dir=$1 srcdir=${2:-} o
	local objs=()
	while IFS= read -r o; do
		# an object whose source is gone is left over from an older build
		[ -z "$srcdir" ] || [ -e "$srcdir/${o%.o}" ] || continue
		objs+=("$o")
	done < <(cd "$dir" && find . -name '*.o' | sed 's|^\./||' | sort)
	[ ${#objs[@]} -gt 0 ] || return 0
	# one nm per kind for all objects: "OBJ: [ADDR] TYPE SYMBOL"
	{
		(cd "$dir" && nm -A --defined-only -g "${objs[@]}") | awk '{ f = $0; sub(/\.o:.*/, "", f); print "def", $NF, f }'
		(cd "$dir" && nm -A -u "${objs[@]}") | awk '{ f = $0; sub(/\.o:.*/, "", f); print "use", $NF, f }'
	} >"$tmp/nm"
	awk -v exc="$exceptions" '
		BEGIN { n = split(exc, e, " "); for (i = 1; i + 1 <= n; i += 2) skip[e[i] " " e[i + 1]] = 1 }
		$1 == "def" { def[$2] = $3; node[$3] = 1; next }
		$1 == "use" { use[++nu] = $2; user[nu] = $3; node[$3] = 1 }
		END {
			for (i = 1; i <= nu; i++) {
				b = def[use[i]]; a = user[i]
				if (b == "" || a == b || ((a " " b) in skip)) continue
				if (!((a, b) in edge)) edge[a, b] = use[i]
				reach[a, b] = 1
			}
			m = 0
			for (v in node) name[++m] = v
			for (k = 1; k <= m; k++) for (i = 1; i <= m; i++) if ((name[i], name[k]) in reach)
				for (j = 1; j <= m; j++) if ((name[k], name[j]) in reach) reach[name[i], name[j]] = 1
			c = 0
			for (i = 1; i <= m; i++) {
				a = name[i]
				if ((a in done) || !((a, a) in reach)) continue
				c++
				for (j = 1; j <= m; j++) { b = name[j]; if (b == a || ((a, b) in reach && (b, a) in reach)) done[b] = c }
				for (x in done) if (done[x] == c) for (y in done) if (done[y] == c && (x, y) in edge)
					printf "circle %d: %s -> %s (%s)\n", c, x, y, edge[x, y]
			}
		}' "$tmp/nm" | sort
}

# The checker finds a circle: two objects that call each other, and a third
# one only called.
mkdir -p "$tmp/self"
printf 'int lower(void);\nint upper(int x) { return x ? lower() : 0; }\n' >"$tmp/self/upper.c"
printf 'int upper(int x);\nint leaf(void);\nint lower(void) { return upper(0) + leaf(); }\n' >"$tmp/self/lower.c"
printf 'int leaf(void) { return 1; }\n' >"$tmp/self/leaf.c"
for f in upper lower leaf; do cc -c -o "$tmp/self/$f.o" "$tmp/self/$f.c" || bad "cc $f.c"; done
self=$(circles "$tmp/self")
check "the checker finds upper.c <-> lower.c: got '$self'" \
	[ "$self" = $'circle 1: lower -> upper (upper)\ncircle 1: upper -> lower (lower)' ]

objs=$build/CMakeFiles/btr_objs.dir
[ -d "$objs/lib" ] || skip "no library objects in $objs"
found=$(circles "$objs" "$src")
n=$(cd "$objs" && find lib -name '*.o' | while read -r o; do [ -e "$src/${o%.o}" ] && echo; done | wc -l)
check "at least 50 library objects read (got $n)" [ "$n" -ge 50 ]
if [ -n "$found" ]; then
	bad "files of lib/ that call each other (split them so that the lower one never calls the upper one):"
	printf '%s\n' "$found" >&2
fi

# The QEMU plugin's files: the same rule, read from its own objects (a
# sanitizer build adds copies of lib/'s sources there: not plugin files,
# so left out by the source check).
qobjs=$build/agents/qemu/CMakeFiles/btr-qemu.dir
qfound=$(circles "$qobjs" "$src/agents/qemu")
qn=$(cd "$qobjs" && find . -maxdepth 1 -name '*.o' | while read -r o; do [ -e "$src/agents/qemu/${o%.o}" ] && echo; done | wc -l)
check "at least 12 plugin objects read (got $qn)" [ "$qn" -ge 12 ]
if [ -n "$qfound" ]; then
	bad "files of agents/qemu/ that call each other (the lower one must not call the upper one):"
	printf '%s\n' "$qfound" >&2
fi
finish cli_layering "$n library objects, $qn plugin objects"
