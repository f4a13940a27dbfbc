// What the soak samples: the client process's resident memory, and the
// server's used_memory and key count (asked through a client of its own).
#pragma once

#include "dlock/client.hpp"

namespace dlock::soak {

struct Sample {
    double minutes = 0;
    long client_rss = -1;   // bytes; -1: not read
    long client_heap = -1;  // bytes malloc hands out now: RSS without the allocator's own keep
    long used_memory = -1;  // bytes; -1: the server did not answer
    long keys = -1;
    int held = 0;           // holds of the held pool at that moment
    long cycles = 0;        // lock/unlock cycles since the start
    long busy = 0;          // attempts that found the name taken, since the start
};

long resident_bytes();
long heap_in_use_bytes();
// Fills used_memory and keys; leaves -1 where the server did not answer.
void sample_server(Client& checker, Sample& sample);

}  // namespace dlock::soak
