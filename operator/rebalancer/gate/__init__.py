"""The join gate (`rebalancer gate`): an init container that holds its pod until its batch opens.

Mechanism. The gate knows its pod from the downward API (POD_NAME, POD_NAMESPACE) and watches
that one pod through the Kubernetes API (a list and watch with fieldSelector=metadata.name, so
the pod's service account needs list and watch on pods in its namespace: the chart's
gate.serviceAccounts grants them). The operator
releases a batch by writing `rebalancer.dev/gate: open` on each of its pods, with
`rebalancer.dev/gate-open-at`: one wall-clock moment (epoch seconds) for the whole batch, a
little after the patches (1 s, or 2 s after the start of a gate that has only just started).
Every gate of the batch sees its MODIFIED event, waits for that moment and exits 0, and the
kubelet starts the main containers together. A busy API server delivers a batch's patches over
a second or more; the common moment keeps the pods together anyway. A moment already past, or
more than 10 s ahead (clocks that disagree), opens at once. A pod is a new object each time
its controller recreates it, so an open gate never carries over to the pod's next incarnation.

- The watch resumes from the last resourceVersion (bookmarks keep it fresh); a 410 Gone or a
  broken connection relists, with backoff while the API is unreachable.
- Timeout (`--timeout`, default 900 s, 0 for never): the gate exits 1 with a message, and the
  kubelet restarts it per the pod's restartPolicy (the wait starts over).
- Bypass (`--bypass-after`, default 120 s, 0 for never): while it holds a pod the operator
  refreshes `rebalancer.dev/gate-held-at` on it; a gate that sees no refresh for this long
  (counted from its own start when there was none) lets the pod go (exit 0, saying so), so pods
  still start when the operator is gone. The operator, once back, tells each bypass with a
  GateBypassed Event and rebalancer_gate_bypasses_total.
- Where the API is: REBALANCER_API_SERVER (a plain URL, for example a local proxy), else
  KUBECONFIG, else the in-cluster service account.

Exit codes: 0 opened or bypassed, 1 timed out, 2 misconfigured, 3 the pod is gone, 4 timed out
with every request refused (HTTP 403: a missing grant, which the last line names with the
chart value that grants it).
"""
