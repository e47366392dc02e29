#!/usr/bin/env bash
# cli_commands.sh - the registry of commands (tools/btr/commands.c, printed
# by `btr --list-commands`) against what it stands for: every command of
# `btr --help` is in it and the other way round; each has its reference
# page under docs/ and a row in docs/cli.md linking it, and its test under
# tests/ that runs it; every form the other tests take from it runs on a
# real trace and does what its flags say (writes-stdout: output on stdout,
# writes-file: OUT written, binary: refused on a terminal's stdout is
# cli_output.sh's); every command whose --help has the stream options is
# flagged reads-trace.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
src=$lib_src
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$btr" --list-commands >list.txt 2>err.txt; rc=$?
check "--list-commands: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
check "--list-commands: five tab-separated fields a line" \
  awk -F'\t' 'NF != 5 { exit 1 }' list.txt
names=$(cut -f1 list.txt | uniq)
check "--list-commands: one block of lines per command" [ "$(echo "$names" | sort | uniq -d)" = "" ]
help=$("$btr" --help | sed -n 's/^  \([a-z]*\)  .*/\1/p')
check "btr --help lists the registry's commands, in its order" [ "$help" = "$names" ]
check "the registry holds the commands ($(echo $names | wc -w))" [ "$(echo $names | wc -w)" -ge 20 ]

# ---- each command: its doc page, its row in docs/cli.md, its test ----
while IFS=$'\t' read -r name doc test; do
  check "btr $name: its page docs/$doc exists" [ -s "$src/docs/$doc" ]
  check "btr $name: docs/cli.md has its row linking $doc" \
    grep -Eq "^\| \`btr $name[ \`].*\]\($doc\)" "$src/docs/cli.md"
  check "btr $name: its test tests/$test exists" [ -s "$src/tests/$test" ]
  # (the test, and the files it sources from tests/)
  files="$src/tests/$test $(sed -n 's|^\. "\$src/tests/\([a-z_]*\.sh\)"$|'"$src"'/tests/\1|p' "$src/tests/$test")"
  # shellcheck disable=SC2086
  check "btr $name: tests/$test runs it" grep -Eiq "\\\$\{?btr\}?\"? +$name( |\$)" $files
done < <(cut -f1-3 list.txt | uniq)

# ---- the flags: reads-trace is what has the stream options ----
for name in $names; do
  subs=$("$btr" "$name" --help 2>&1 | sed -n "s/^ *\(Usage: \)\{0,1\}btr $name \([a-z]*\) .*/\2/p" | sort -u)
  stream=no
  if [ -n "$subs" ]; then
    for s in $subs; do
      # shellcheck disable=SC2086
      "$btr" $name $s --help 2>&1 | grep -q -- '--tid TID' && stream=yes
    done
  else
    "$btr" "$name" --help 2>&1 | grep -q -- '--tid TID' && stream=yes
  fi
  flagged=no
  forms reads-trace | cut -f1 | grep -qx "$name" && flagged=yes
  check "btr $name: flagged reads-trace ($flagged) if its --help has the stream options ($stream)" \
    [ $stream = no -o $flagged = yes ]
done

# ---- every form runs on a real trace and does what its flags say ----
need_qemu
record_qemu t.btr flow_loops "$build/prog_flow_loops" 1 || finish cli_commands
"$btr" bolt -o p.fdata t.btr 2>/dev/null
FILE=t.btr FUNC=main ELF=$build/prog_symbols_nopie PROG=/bin/true PROFILE=p.fdata
ADDR=$(nm "$ELF" | awk '$3=="main"{print "0x"$1}')
n=0
while IFS=$'\t' read -r name flags form; do
  n=$((n+1))
  OUT=o$n.dot
  line=$(fill "$form")
  # shellcheck disable=SC2086
  "$btr" $line >out.txt 2>err.txt </dev/null; rc=$?
  check "btr $line: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
  case ",$flags," in *,writes-stdout,*)
    check "btr $line: writes-stdout: output on stdout" [ -s out.txt ] ;;
  esac
  case ",$flags," in *,writes-file,*)
    check "btr $line: writes-file: $OUT written" [ -s "$OUT" ]
    check "btr $line: writes-file: nothing on stdout" [ ! -s out.txt ] ;;
  esac
  # one operand more than the form takes: a usage error, before any file is read
  case ",$flags," in *,reads-trace,*)
    # shellcheck disable=SC2086
    "$btr" $line extra.btr >out.txt 2>err.txt </dev/null; rc=$?
    check "btr $line extra.btr: one operand too many, exit 2 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 2 ] ;;
  esac
done < <(forms)
check "forms run: $n" [ $n -ge 30 ]
finish cli_commands "$n forms"
