/* Clocks. Monotonic for intervals and deadlines, wall for what users see. */
#ifndef YARD_CLOCK_H
#define YARD_CLOCK_H

#include <stdint.h>

uint64_t mono_ms(void);
uint64_t mono_us(void);
/* boot_ms: like mono_ms, but it also counts the time the machine was
 * suspended (CLOCK_BOOTTIME), as another machine's clock does: for
 * deadlines that another machine keeps too, such as a lease. */
uint64_t boot_ms(void);
/* wall_us: microseconds since the Unix epoch. */
uint64_t wall_us(void);
/* format_time_utc: "2026-11-29T16:15:27Z" for a wall_us value. */
void format_time_utc(uint64_t us, char *buf, unsigned len);

#endif
