/* counterpoint.h — self-monitoring regions (Counterpoint selfmon, LiMiT-style).
 *
 * Link with -lcounterpoint_selfmon (shared) or libcounterpoint_selfmon.a -lpthread -ldl -lm
 * (static). Every function returns 0 (or a handle >= 0) on success and -1 on failure; then
 * cp_last_error() says why. Regions are per thread and nest; a report merges all threads.
 * Counters are read in user space (rdpmc) where the kernel allows it and by read(2) otherwise
 * (always on machines without a hardware PMU; software events such as task-clock still count).
 */
#ifndef COUNTERPOINT_H
#define COUNTERPOINT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Choose the events, in perf's syntax ("task-clock,page-faults", "cycles,instructions").
 * NULL means "task-clock". Call once, before the first region; an event this machine cannot
 * count is an error here, not later. Without cp_init, regions count task-clock. */
int cp_init(const char *events);

/* Why the last call on this thread failed (empty string if it did not). Valid until the
 * next cp_ call on this thread. */
const char *cp_last_error(void);

/* Begin a region named `name` (copied) on the calling thread; returns its handle. */
int cp_region_begin(const char *name);

/* End the region `handle` (and any region still open inside it). */
int cp_region_end(int handle);

/* Write the table report to `path` (NULL: stderr). */
int cp_report(const char *path);

/* Write the JSON report to `path` (NULL: stdout): per region name, entries, threads,
 * total_ns, mean_ns, max_ns, counts per event and, per event, entries whose delta was lost
 * (a failed read). */
int cp_report_json(const char *path);

/* At exit, print the table on stderr and write the JSON to `json_path` if not NULL.
 * After fork: the child starts with no regions and its own counters (regions open across the
 * fork are dropped), and does not report at exit unless it calls this function itself. */
int cp_report_at_exit(const char *json_path);

/* Per-request attribution. Begin a segment of request `id` (class `class`, copied; NULL: "")
 * on the calling thread and end it there: one counter read per boundary, the thread's deltas
 * go to the request. A request that moves to another thread is ended on the old thread and
 * begun again with the same id on the new one: its segments are stitched by id (wall time from
 * the first begin to the last end, counts summed, threads counted). */
int cp_request_begin(uint64_t id, const char *class_name);
int cp_request_end(uint64_t id);

/* Append the finished requests as JSON lines to `path` (NULL: stdout) and forget them;
 * returns how many, or -1. One line: {"id","class","segments","threads","open_segments",
 * "wall_ns","served_ns","counts":{event:n},"lost":{event:n}}. */
int cp_requests_take(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* COUNTERPOINT_H */
