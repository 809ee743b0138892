-- wrk script for the IMDS figure: every request carries `Metadata: true` (IMDS answers 400
-- without it), and the summary is printed as one JSON line that bench-run parses.
wrk.method = "GET"
wrk.headers["Metadata"] = "true"

done = function(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"errors_connect":%d,"errors_read":%d,"errors_write":%d,"errors_status":%d,' ..
    '"errors_timeout":%d}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status,
    summary.errors.timeout))
end
