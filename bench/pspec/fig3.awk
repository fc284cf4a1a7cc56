# The verdicts of the report's Figure 3 (bench/pspec/fig3.pspec), computed by
# hand: what a user would write without PSpec. Reads are matched by the tid
# attribute; a CacheHit with the same tid inside a Read makes it a hit.
# Durations carry one tick of error either way ([d,1,1]), so "time <= L" holds
# when d - 1 <= L, as in PSpec. Prints one line per failing Read and a verdict
# per assertion.
BEGIN { ms = 1000000; tick = 1 }
/^#/ { if ($1 == "#tick-ns") tick = $2; next }
$3 == "StartRead" { st[$4] = $1; sz[$4] = $5; hit[$4] = 0; open[$4] = 1; next }
$3 == "CacheHit" { if (open[$4]) hit[$4] = 1; next }
$3 == "EndRead" {
    if (!open[$4]) next
    open[$4] = 0
    d = $1 - st[$4]
    n++; sum += d
    if (hit[$4]) hits++
    if (d - 1 > 10 * ms / tick) { f1++; print "fail 1: read on thread " $4 " from " st[$4] " to " $1 " time " d }
    if (sz[$4] <= 4096 && d - 1 > 8 * ms / tick) { f3++; print "fail 3: read on thread " $4 " from " st[$4] " to " $1 " time " d }
    next
}
END {
    print "assertion 1 " (f1 ? "failed" : "held")
    print "assertion 2 " (n && sum / n <= 5 * ms / tick ? "held" : "failed")
    print "assertion 3 " (f3 ? "failed" : "held")
    print "assertion 4 " (n && hits / n >= 0.75 ? "held" : "failed")
}
