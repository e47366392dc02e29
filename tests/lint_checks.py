#!/usr/bin/env python3
"""lint_checks.py FILE... - finds shell-test lines where `check` asserts only
part of a condition: `check "what" [ A ] && B` (or `|| B`) counts A alone
(tests/lib.sh), so B can fail unseen.  A `check` line (continuation lines
joined, heredoc bodies skipped) must not hold && or || outside quotes;
write one check per condition, or one command that tests both
(bash -c "A && B").  Also: a `check` that reads `$?` after a `$(...)` in
its own words (`check "x $(head f)" [ $? -eq 0 ]`): the substitution sets
`$?` before the test reads it, so it tests `head`, never the command; save
the status first (rc=$?).  Prints FILE:LINE: TEXT per finding; exit 1 if any."""
import re
import sys


def unquoted(s):
    """@s with quoted strings, $(...) and comments removed."""
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        if c == '\\':
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"':
            i += 1
            while i < n and s[i] != '"':
                i += 2 if s[i] == '\\' else 1
            i += 1
            continue
        if s.startswith('$(', i):
            depth, i = 1, i + 2
            while i < n and depth:
                depth += {'(': 1, ')': -1}.get(s[i], 0)
                i += 1
            continue
        if c == '#' and (i == 0 or s[i - 1] in ' \t;'):
            break
        out.append(c)
        i += 1
    return ''.join(out)


def findings(path):
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    i, end_tag = 0, None
    while i < len(lines):
        no, line = i + 1, lines[i]
        i += 1
        if end_tag is not None:
            if line.strip() == end_tag:
                end_tag = None
            continue
        while line.endswith('\\') and i < len(lines):
            line = line[:-1] + ' ' + lines[i]
            i += 1
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line.replace('<<<', ''))
        if m:
            end_tag = m.group(1)
        code = unquoted(line)
        if re.search(r'(^|[;\s])check\s.*\$\(.*\$\?', line):
            yield no, line.strip()
            continue
        # a check (or check_skip) command anywhere in the line, e.g. after
        # `then` or `;`
        for part in re.split(r';|\bthen\b|\belse\b|\bdo\b', code):
            p = part.strip()
            if re.match(r'(if\s+!?\s*)?check\s', p) and re.search(r'&&|\|\|', p):
                yield no, line.strip()
                break


def main():
    bad = 0
    for path in sys.argv[1:]:
        for no, text in findings(path):
            print("%s:%d: %s" % (path, no, text))
            bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
