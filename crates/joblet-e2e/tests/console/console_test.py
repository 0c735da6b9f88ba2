"""The web console in a real browser: Debian's chromium, headless, driven by
Playwright for Python. Run by crates/joblet-e2e/tests/console.rs, which
starts the node and talks with this script over stdin/stdout, one line
each way per step:

  -> "STEP overview"            8 GPUs seen on the overview
  <- "JOB <id>"                 the test ran a job from the CLI
  -> "STEP drained <index>"     an admin drained that GPU from the GPU page
  <- "OK"                       `rnx gpu status` agrees
  -> "STEP viewer-refused <i>"  a viewer was refused draining GPU i
  <- "OK"                       the GPU is unchanged
  -> "DONE"

Any failed expectation raises; the script exits 1 with the reason on
stderr. The node's certificate is from the node's own CA, which this
browser does not trust: contexts are opened with ignore_https_errors=True
(TLS still encrypts; the test does not check the server's identity).

Usage: console_test.py --admin-link URL --viewer-link URL --workflow ID
       --screenshots DIR [--chromium /usr/bin/chromium]
"""

import argparse
import os
import re
import sys
import time

from playwright.sync_api import expect, sync_playwright

STEP_TIMEOUT_MS = 20_000


def say(line):
    print(line, flush=True)


def hear(expected_prefix):
    line = sys.stdin.readline()
    if not line:
        raise AssertionError(f"the test closed stdin while we waited for {expected_prefix!r}")
    line = line.strip()
    if not line.startswith(expected_prefix):
        raise AssertionError(f"expected {expected_prefix!r} from the test, got {line!r}")
    return line[len(expected_prefix):].strip()


def log(msg):
    print(f"[console_test {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Shots:
    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)

    def take(self, page, name):
        path = os.path.join(self.dir, f"{name}.png")
        page.screenshot(path=path, full_page=True)
        log(f"screenshot {path}")


def sign_in(browser, link, role):
    """A fresh browser context signed in through a one-time link."""
    ctx = browser.new_context(ignore_https_errors=True, viewport={"width": 1360, "height": 900})
    ctx.set_default_timeout(STEP_TIMEOUT_MS)
    page = ctx.new_page()
    errors = []
    # Failed loads are recorded with their URL by the response handler.
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None)
    page.goto(link)
    # The login redirects to /console/; the cookie is HttpOnly, so the page
    # only knows its session from GET /api/v1/session.
    expect(page).to_have_url(re.compile(r"/console/(#.*)?$"))
    expect(page.locator("#role")).to_have_text(role)
    cookies = [c for c in ctx.cookies() if c["name"] == "joblet_session"]
    assert cookies, "no joblet_session cookie after sign-in"
    c = cookies[0]
    assert c["httpOnly"] and c["secure"] and c["sameSite"] == "Strict", f"cookie flags: {c}"
    return ctx, page, errors


def overview(page, shots):
    page.goto(page.url.split("#")[0] + "#/overview")
    tiles = page.locator("#gpu-tiles .gpu")
    expect(tiles).to_have_count(8)
    for i in range(8):
        expect(page.locator(f'#gpu-tiles .gpu[data-gpu="{i}"] .badge')).to_have_text("AVAILABLE")
    expect(page.locator("#card-gpus .value")).to_have_text("8")
    expect(page.locator("#nodes tbody tr")).to_have_count(1)
    shots.take(page, "overview")


def jobs_and_log(page, job_id, shots):
    base = page.url.split("#")[0]
    page.goto(base + "#/jobs")
    row = page.locator(f'#jobs tr[data-job="{job_id}"]')
    expect(row).to_be_visible()
    expect(row).to_have_attribute("data-state", "RUNNING")
    # Every job is listed (the failed one, the workflow's four, this one);
    # sorting by any column works; filtering by state keeps it while it runs.
    expect(page.locator("#jobs tbody tr")).to_have_count(6)
    page.locator('th[data-sort="state"]').click()
    expect(page.locator('th[data-sort="state"]')).to_have_class(re.compile("sorted-asc"))
    expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-state", "COMPLETED")
    shots.take(page, "jobs")
    page.select_option("#filter-state", "RUNNING")
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    expect(row).to_be_visible()
    row.click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    expect(page.locator("#job-id")).to_have_text(job_id)
    # The log arrives live: the first lines while the job still runs...
    log_box = page.locator("#log")
    expect(log_box).to_contain_text("tick 2")
    assert "ended" not in page.locator("#log-status").inner_text(), "the log ended before tick 2 was seen"
    expect(page.locator("#log-status .live")).to_be_visible()
    # ...and the rest until it ends.
    expect(log_box).to_contain_text("tick 6")
    expect(log_box).to_have_attribute("data-ended", "COMPLETED")
    expect(page.locator("#log-status")).to_contain_text("ended COMPLETED")
    text = log_box.inner_text()
    assert text.count("tick 1\n") == 1 and text.count("tick 6") == 1, f"every line exactly once: {text!r}"
    # Its timeline and its GPUs with their memory against the quota.
    expect(page.locator("#timeline li")).to_have_count(4)  # PENDING, QUEUED, RUNNING, COMPLETED
    expect(page.locator('#timeline li[data-state="COMPLETED"]')).to_have_count(1)
    expect(page.locator("#job-gpus a")).to_have_count(2)
    expect(page.locator("#job-gpus")).to_contain_text("per GPU")
    expect(page.locator("#quota-meter")).to_have_count(1)
    shots.take(page, "job-detail")


def gpus_drain(page, index, shots):
    base = page.url.split("#")[0]
    page.goto(base + f"#/gpus/{index}")
    expect(page.locator("#gpus tbody tr")).to_have_count(8)
    # Charts from the node's own history (written every 5 s).
    chart = page.locator('#gpu-charts [data-chart="Utilisation"]')
    expect(chart).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"), timeout=30_000)
    expect(page.locator('#gpu-charts [data-chart="Temperature"] canvas')).to_have_count(1)
    expect(page.locator('#gpu-charts [data-chart="Memory used"] canvas')).to_have_count(1)
    # Its health, with the XID the test injected (13: the GPU stays in service).
    expect(page.locator("#gpu-history")).to_contain_text("XID 13")
    expect(page.locator("#gpu-facts")).to_contain_text("XIDs seen")
    drain = page.locator(f'#gpus tr[data-gpu="{index}"] button[data-action="drain"]')
    expect(drain).to_be_enabled()
    drain.click()
    expect(page.locator("#banner")).to_contain_text(f"GPU {index} is now DRAINING")
    expect(page.locator(f'#gpus tr[data-gpu="{index}"]')).to_have_attribute("data-state", "DRAINING")
    page.locator('#window button[data-window="1h"]').click()
    shots.take(page, "gpus")


def workflows(page, workflow_id, shots):
    base = page.url.split("#")[0]
    page.goto(base + f"#/workflows/{workflow_id}")
    dag = page.locator("#dag")
    expect(dag.locator("g.node")).to_have_count(4)
    expect(dag.locator("path.edge")).to_have_count(4)
    # Live states: the run ends COMPLETED and so does every job in the DAG.
    expect(dag).to_have_attribute("data-state", "COMPLETED", timeout=40_000)
    for name in ["data-preprocessing", "model-training", "model-evaluation", "publish-report"]:
        expect(dag.locator(f'g.node[data-job="{name}"]')).to_have_attribute("data-state", "COMPLETED")
    # Layers: training right of preprocessing, evaluation right of training.
    xs = {}
    for name in ["data-preprocessing", "model-training", "model-evaluation"]:
        box = dag.locator(f'g.node[data-job="{name}"]').bounding_box()
        xs[name] = box["x"]
    assert xs["data-preprocessing"] < xs["model-training"] < xs["model-evaluation"], xs
    shots.take(page, "workflows")


def history(page, shots):
    base = page.url.split("#")[0]
    page.goto(base + "#/history")
    expect(page.locator('#gpu-hours-owner tr[data-owner="admin"]')).to_have_count(1)
    expect(page.locator("#failures tbody tr[data-reason]")).to_have_count(1)
    expect(page.locator('#failures tr[data-reason="exit code 3"]')).to_have_count(1)
    expect(page.locator("#queue-wait tbody tr[data-day]").first).to_be_visible()
    expect(page.locator('[data-chart="GPU-hours by owner"]')).to_have_attribute("data-points", "1")
    shots.take(page, "history")


def viewer_refused(browser, link, index):
    ctx, page, errors = sign_in(browser, link, "viewer")
    base = page.url.split("#")[0]
    page.goto(base + f"#/gpus/{index}")
    expect(page.locator("#viewer-note")).to_be_visible()
    drain = page.locator(f'#gpus tr[data-gpu="{index}"] button[data-action="drain"]')
    expect(drain).to_be_disabled()
    # A viewer's page offers no drain; a tampered one still gets refused by
    # the node, and the page says why.
    page.evaluate(
        "i => document.querySelectorAll(`#gpus tr[data-gpu=\"${i}\"] button[data-action=drain]`).forEach(b => b.disabled = false)",
        index,
    )
    drain.click()
    banner = page.locator("#banner")
    expect(banner).to_have_attribute("data-kind", "error")
    expect(banner).to_contain_text("Not allowed")
    expect(banner).to_contain_text("viewer")
    expect(page.locator(f'#gpus tr[data-gpu="{index}"]')).to_have_attribute("data-state", "AVAILABLE")
    ctx.close()
    return errors


def link_reuse_refused(browser, link):
    ctx = browser.new_context(ignore_https_errors=True)
    ctx.set_default_timeout(STEP_TIMEOUT_MS)
    page = ctx.new_page()
    page.goto(link)
    # The browser is sent to the console's signed-out page, which says why.
    expect(page.locator("#signed-out")).to_be_visible()
    expect(page.locator("#signin-error")).to_contain_text("used already")
    assert not [c for c in ctx.cookies() if c["name"] == "joblet_session"], "a used link set a session cookie"
    # And the console itself says it is not signed in.
    page.goto(link.split("/console/")[0] + "/console/")
    expect(page.locator("#signed-out")).to_be_visible()
    expect(page.locator("#signed-out")).to_contain_text("rnx console")
    ctx.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-link", required=True)
    ap.add_argument("--viewer-link", required=True)
    ap.add_argument("--workflow", required=True)
    ap.add_argument("--screenshots", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    shots = Shots(a.screenshots)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, args=["--no-sandbox"], headless=True)
        try:
            ctx, page, errors = sign_in(browser, a.admin_link, "admin")
            log("signed in as admin")
            overview(page, shots)
            say("STEP overview")
            job_id = hear("JOB ")
            log(f"watching job {job_id}")
            jobs_and_log(page, job_id, shots)
            gpus_drain(page, 3, shots)
            say("STEP drained 3")
            hear("OK")
            workflows(page, a.workflow, shots)
            history(page, shots)
            assert not errors, f"the admin's pages logged errors: {errors}"
            ctx.close()
            errors = viewer_refused(browser, a.viewer_link, 4)
            # The refused drain is the one failed request; nothing else.
            unexpected = [e for e in errors if not re.match(r"403 POST .*/api/v1/gpus/4/state$", e)]
            assert not unexpected, f"the viewer's pages logged errors: {unexpected}"
            say("STEP viewer-refused 4")
            hear("OK")
            link_reuse_refused(browser, a.admin_link)
            log("a used link is refused")
        finally:
            browser.close()
    say("DONE")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        import traceback

        traceback.print_exc()
        print(f"console_test.py failed: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
