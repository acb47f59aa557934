"""Lint, render and schema-check the Helm chart for scripts/helm-check.mjs.

Helm itself is the `helm_python` package (helm-python-sdk: Helm's Go SDK in a shared library,
no `helm` binary); Kubernetes' schemas come from `kubernetes_validate`, which ships them, so
nothing here touches the network. Reads a request as JSON on stdin:

    {"chart": DIR, "release": NAME, "namespace": NS, "kubeVersions": ["1.30", …],
     "cases": [{"name": …, "values": FILE or null}],
     "out": FILE}

and writes one JSON report to FILE: per case, the lint findings, the schema or render error,
and every rendered manifest (parsed) with the Kubernetes schema errors of each. Deciding what
passes is the caller's job.
"""

import json
import sys

import helm_python as helm
import kubernetes_validate
import kubernetes_validate.utils as kv
import yaml

# helm_python's severities: 0 unknown, 1 info, 2 warning, 3 error.
WARNING = 2


def load_values(path):
    if path is None:
        return {}
    with open(path, encoding="utf-8") as f:
        return helm.values_from_yaml(f.read())


def validate(doc, versions):
    """The schema errors of one manifest against each Kubernetes version (strict: unknown
    fields are errors)."""
    errors = []
    for version in versions:
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            errors.append({
                "version": version,
                "path": ".".join(str(p) for p in e.path),
                "message": e.message,
            })
        except kv.SchemaNotFoundError as e:
            errors.append({"version": version, "path": "", "message": e.message})
    return errors


def check_case(request, case):
    chart_dir = request["chart"]
    result = {"name": case["name"], "lint": [], "lintErrors": [], "schemaError": None,
              "renderError": None, "manifests": []}
    values = load_values(case.get("values"))
    report = helm.lint(chart_dir, values, strict=True, namespace=request["namespace"],
                       kube_version="v%s.0" % request["kubeVersions"][0])
    result["lint"] = [m for m in report.get("messages", []) if m.get("severity", 0) >= WARNING]
    result["lintErrors"] = report.get("errors", [])
    with helm.Chart.load(chart_dir) as chart:
        try:
            chart.validate_schema(values)
        except helm.HelmError as e:
            result["schemaError"] = str(e)
            return result
        try:
            rendered = chart.render(values, name=request["release"], namespace=request["namespace"],
                                    is_install=True)
        except helm.HelmError as e:
            result["renderError"] = str(e)
            return result
    for source in sorted(rendered):
        if not source.endswith((".yaml", ".yml")):
            continue
        for index, doc in enumerate(yaml.safe_load_all(rendered[source])):
            if doc is None:
                continue
            result["manifests"].append({
                "source": source,
                "index": index,
                "doc": doc,
                "errors": validate(doc, request["kubeVersions"]),
            })
    notes = [s for s in rendered if s.endswith("NOTES.txt")]
    result["notes"] = rendered[notes[0]] if notes else None
    return result


def main():
    request = json.load(sys.stdin)
    report = {
        "helm": helm.helm_sdk_version(),
        "kubernetesValidate": kubernetes_validate.__version__,
        "kubeVersions": request["kubeVersions"],
        "cases": [check_case(request, case) for case in request["cases"]],
    }
    # To a file, not stdout: Helm's Go code writes its own log lines to the process's streams.
    with open(request["out"], "w", encoding="utf-8") as out:
        json.dump(report, out)


if __name__ == "__main__":
    main()
