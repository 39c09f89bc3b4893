#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/,
from the examples (examples/problems, examples/submissions) and the wire
formats of PROTOCOL.md. Run from the repository root; idempotent."""
import io, json, os, struct, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def envelope(v):
    return {"status": "ok", "message": "", "data": v}

problems = {}
for pid in sorted(os.listdir(os.path.join(ROOT, "examples", "problems"))):
    d = os.path.join(ROOT, "examples", "problems", pid)
    problems[pid] = {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}

def zipped(files, method=zipfile.ZIP_DEFLATED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for n, data in files.items():
            z.writestr(n, data)
    return b.getvalue()

# hub_register: a register answer (201), bare, wrapped, loose.
reg = {"runner_id": "rn_1", "token": "rk_0123", "config": {"heartbeat_interval_sec": 15, "poll_interval_sec": 3, "max_concurrent_jobs": 8}}
put("hub_register", "bare", json.dumps(reg))
put("hub_register", "wrapped", json.dumps(envelope(reg)))
put("hub_register", "strings", json.dumps({"runner_id": "rn_2", "token": "t", "config": {"heartbeat_interval_sec": "30"}}))
put("hub_register", "noconfig", json.dumps({"runner_id": "rn_3", "token": "t"}))
put("hub_register", "html", "<html><body>Bad gateway</body></html>")

# hub_next_job: next-job bodies as hubd and Normal-OJ send them.
for pid, files in problems.items():
    meta = json.loads(files["meta.json"])
    job = {"job_id": "jb_" + pid, "submission_id": "s000" + pid, "problem_id": int(pid), "language": 0,
           "code_url": "http://127.0.0.1:8080/code/jb_%s.zip" % pid, "checker": "diff", "tasks": meta["tasks"]}
    put("hub_next_job", "p" + pid, json.dumps(job))
    job2 = dict(job, problem_id=pid, language="2", checker="float:abs=1e-6,rel=1e-9")
    put("hub_next_job", "p%s-wrapped" % pid, json.dumps(envelope(job2)))
put("hub_next_job", "noid", json.dumps({"submission_id": 1, "tasks": []}))
put("hub_next_job", "scores", '{"job_id":"jb_x","submission_id":"s","problem_id":1,"language":0,"code_url":"u","tasks":[{"taskScore":50,"memoryLimit":65536,"timeLimit":1000,"caseCount":1},{"taskScore":50,"memoryLimit":65536,"timeLimit":1000,"caseCount":1}]}')

# hub_answer: call index, status (2 bytes, 100 + n % 500), body.
calls = ["register", "heartbeat", "next_job", "cancel_poll", "complete", "abort", "events", "testdata", "code"]
def answer(call, code, body):
    return bytes([calls.index(call)]) + struct.pack(">H", code - 100) + body.encode()
put("hub_answer", "heartbeat-204", answer("heartbeat", 204, ""))
put("hub_answer", "heartbeat-401", answer("heartbeat", 401, '{"error": "invalid runner token"}'))
put("hub_answer", "complete-204", answer("complete", 204, ""))
put("hub_answer", "complete-400", answer("complete", 400, '{"error": "1 task lists for 2 tasks"}'))
put("hub_answer", "complete-409", answer("complete", 409, '{"error": "the job is not held by this runner"}'))
put("hub_answer", "abort-202", answer("abort", 202, '{"outcome": "requeued"}'))
put("hub_answer", "events-413", answer("events", 413, "<html>too large</html>"))
put("hub_answer", "meta-200", answer("testdata", 200, json.dumps(envelope(json.loads(problems["1"]["meta.json"])))))
put("hub_answer", "checksum-200", answer("testdata", 200, json.dumps(envelope("0123456789abcdef0123456789abcdef"))))
put("hub_answer", "testdata-403", answer("testdata", 403, '{"error": "Invalid sandbox token"}'))
put("hub_answer", "proxy-502", answer("complete", 502, "<html>Bad gateway</html>"))

# testdata_zip: first byte (bit 0: code bounds; bits 1-2: cases - 1), the zip.
for pid, files in problems.items():
    put("testdata_zip", "p" + pid, bytes([2]) + zipped({n: d for n, d in files.items() if n != "meta.json"}))
    put("testdata_zip", "p%s-stored" % pid, bytes([2]) + zipped({n: d for n, d in files.items() if n != "meta.json"}, zipfile.ZIP_STORED))
put("testdata_zip", "dirs", bytes([0]) + zipped({"0000.in": "1\n", "0000.out": "1\n", "include/": "", "include/a.h": "#pragma once\n"}))
put("testdata_zip", "climb", bytes([0]) + zipped({"../0000.in": "x"}))
put("testdata_zip", "twice", bytes([0]) + zipped({"0000.in": "x", "./0000.in": "y"}))
subs = os.path.join(ROOT, "examples", "submissions")
for n in ["ab_ok.c", "ab_ok.py"]:
    put("testdata_zip", "code-" + n, bytes([1]) + zipped({"main." + n.split(".")[1]: open(os.path.join(subs, n), "rb").read()}))

# checker: name, output, answer.
for pid, files in problems.items():
    out = files["0000.out"]
    put("checker", "p%s-diff" % pid, b"diff\0" + out + b"  \n\n\0" + out)
    put("checker", "p%s-exact" % pid, b"exact\0" + out + b"\0" + out)
put("checker", "float", b"float:1e-4\x001.00001 2.5\r\n3\0001.0 2.50000\n3")
put("checker", "float-abs-rel", b"float:abs=1e-6,rel=1e-9\x001e10\n-0.0\0" + b"10000000000.001\n0")
put("checker", "token", b"token\0a  b\tc\n\0a b c")
put("checker", "wa", b"\0a b\0a  b")
put("checker", "cr", b"diff\0a\rb\r\n\0a\nb")

# duration: seconds as an operator writes them.
for i, s in enumerate(["60", "60.0", " 0.5 ", "0.001", "999999999999.999999999999", "1e3", "-1", "5s"]):
    put("duration", str(i), s)

# hubd_request: method, path, query, body.
def req(m, p, q, b):
    return "\0".join([m, p, q, b]).encode()
put("hubd_request", "register", req("POST", "/runners/register", "", json.dumps({"registration_token": "tok", "name": "host-1"})))
put("hubd_request", "heartbeat", req("POST", "/runners/rn_1/heartbeat", "", json.dumps({"active_job_ids": ["jb_1", "jb_2"]})))
put("hubd_request", "next-job", req("GET", "/runners/rn_1/next-job", "wait=25", ""))
put("hubd_request", "cancel", req("DELETE", "/runners/rn_1/next-job", "", ""))
case = {"status": "AC", "execTime": 1, "memoryUsage": 2, "exitCode": 0, "stdout": "", "stderr": ""}
put("hubd_request", "complete", req("PUT", "/runners/rn_1/jobs/jb_1/complete", "", json.dumps({"tasks": [[case]]})))
put("hubd_request", "complete-2", req("PUT", "/runners/rn_1/jobs/jb_1/complete", "", json.dumps({"tasks": [[case, dict(case, status="WA")], [case, case, case]]})))
put("hubd_request", "abort", req("PUT", "/runners/rn_1/jobs/jb_1/abort", "", json.dumps({"reason": "prep_failed", "message": "x"})))
put("hubd_request", "events", req("POST", "/runners/rn_1/jobs/jb_1/events", "", json.dumps({"events": [{"case": "0000", "status": "AC"}]})))
put("hubd_request", "meta", req("GET", "/problem/1/meta", "token=a%20b+c", ""))
put("hubd_request", "code", req("GET", "/code/jb_1.zip", "", ""))
put("hubd_request", "metrics", req("HEAD", "/metrics", "", ""))

# problem_add: meta.json, the case files to leave out (and a --language),
# then more files.
for pid, files in problems.items():
    put("problem_add", "p" + pid, files["meta.json"] + b"\0c11")
put("problem_add", "missing", problems["1"]["meta.json"] + b"\0\x03")
put("problem_add", "extra", problems["2"]["meta.json"] + b"\0python3\0include/x.h\0#define X 1\n\0checker.cpp\0int main(){}\n")
put("problem_add", "scores", b'{"tasks": [{"taskScore": 99, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 1}]}\x005')

# spool_rows: 16 fields, each typed by its first byte (t text, i integer,
# n null, b blob, f real).
cfg = json.dumps(reg["config"])
job = open(os.path.join(CORPUS, "hub_next_job", "seed-p1"), "rb").read().decode()
res = json.dumps(case)
rows = ["trn_1", "trk_0123", "t" + cfg, "tjb_1", "tstarted", "t" + job, "i1700000000000", "t/var/lib/ojrunner/testdata/1/abc",
        "t", "i0", "i1", "t" + res, "tcomplete", "t" + json.dumps({"tasks": [[case]]}), "t" + json.dumps({"case": "0000"}), "tjobs_claimed"]
put("spool_rows", "started", "\0".join(rows))
rows2 = list(rows); rows2[4] = "tjudged"; rows2[12] = "tabort:drain"; rows2[11] = "b\xff"; rows2[2] = "n"
put("spool_rows", "odd-types", "\0".join(rows2).encode("latin-1"))
rows3 = list(rows); rows3[4] = "tlost"; rows3[9] = "i-1"; rows3[5] = "f1.5"
put("spool_rows", "unknown-state", "\0".join(rows3))

# icpc_package: problem.yaml, .timelimit, then pairs of a path and its bytes
# (tests/icpc/sum's package, and variants the mapping refuses or takes).
def package(d):
    out = []
    for base, _, names in sorted(os.walk(d)):
        for n in sorted(names):
            p = os.path.join(base, n)
            rel = os.path.relpath(p, d)
            if rel in ("problem.yaml", ".timelimit"):
                continue
            out += [rel.encode(), open(p, "rb").read()]
    return out
sum_dir = os.path.join(ROOT, "tests", "icpc", "sum")
sum_yaml = open(os.path.join(sum_dir, "problem.yaml"), "rb").read()
sum_limit = open(os.path.join(sum_dir, ".timelimit"), "rb").read()
put("icpc_package", "sum", b"\0".join([sum_yaml, sum_limit] + package(sum_dir)))
plain = [b"data/sample/1.in", b"1 2\n", b"data/sample/1.ans", b"3\n", b"data/secret/a/1.in", b"2 2\n",
         b"data/secret/a/1.ans", b"4\n", b"data/secret/b/2.in", b"1 1\n", b"data/secret/b/2.ans", b"2\n"]
put("icpc_package", "default-floats", b"\0".join([b"name: x\nvalidator_flags: case_sensitive float_tolerance 1e-6\n", b"1.5"] + plain))
put("icpc_package", "scoring", b"\0".join([b"type: scoring\nlimits:\n  memory: 256\n", b"2"] + plain))
put("icpc_package", "aliases", b"\0".join([b"a: &x [1, 2]\nb: *x\nlimits: {time_limit: 1}\n", b""] + plain))
put("icpc_package", "testdata-yaml", b"\0".join([b"limits:\n  time_limit: 2\nvalidator_flags: case_sensitive\n", b"",
    b"data/secret/testdata.yaml", b"output_validator_flags: x\n"] + plain))
