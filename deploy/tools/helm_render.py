#!/usr/bin/env python3
"""`helm template --include-crds` through Helm's own Go SDK (helm-python-sdk's libhelm_c).

    helm-render CHART_DIR [--release NAME] [--namespace NS] [-f VALUES.yaml]... [--set K=V]...
                [--lint]

Prints the CRDs (crds/) and then every rendered template, in file order, as one YAML stream with
`# Source:` comments as helm prints them. With --lint, runs Helm's linter with the same values
first and fails on any error-level finding. Installed by deploy/tools/install.sh.
"""
import argparse
import sys

import helm_python as helm
import yaml


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("chart")
    ap.add_argument("--release", default="magma")
    ap.add_argument("--namespace", default="volcano-system")
    ap.add_argument("-f", "--values", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--lint", action="store_true")
    a = ap.parse_args()
    values = {}
    for f in a.values:
        with open(f) as fh:
            merge(values, yaml.safe_load(fh) or {})
    for s in a.set:
        merge(values, helm.parse_set_string(s))
    if a.lint:
        res = helm.lint(a.chart, values=values, namespace=a.namespace, strict=True)
        # Severity 2 = warning, 3 = error; strict makes warnings count.
        bad = [m for m in res.get("messages") or [] if m.get("severity", 0) >= 2]
        bad += res.get("errors") or []
        if bad:
            for m in bad:
                print(f"helm lint: {m}", file=sys.stderr)
            sys.exit(1)
    out = []
    with helm.Chart.load(a.chart) as chart:
        for crd in chart.crds:
            out.append(f"# Source: {crd['name']}\n{crd['data'].strip()}\n")
        rendered = chart.render(values, name=a.release, namespace=a.namespace, is_install=True)
        for path in sorted(rendered):
            if path.endswith("NOTES.txt") or not rendered[path].strip():
                continue
            for doc in rendered[path].split("\n---\n"):
                if doc.strip() and yaml.safe_load(doc) is not None:
                    out.append(f"# Source: {path}\n{doc.strip()}\n")
    sys.stdout.write("---\n" + "---\n".join(out))


if __name__ == "__main__":
    main()
