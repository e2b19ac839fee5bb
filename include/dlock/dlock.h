// dlock/dlock.h — everything a user needs: connect(), connect_quorum(), Client, Mutex, SharedMutex, Election, options, errors.
#pragma once

#include <dlock/barrier.h>
#include <dlock/client.h>
#include <dlock/counter.h>
#include <dlock/election.h>
#include <dlock/error.h>
#include <dlock/latch.h>
#include <dlock/metrics.h>
#include <dlock/multi_lock.h>
#include <dlock/mutex.h>
#include <dlock/semaphore.h>
#include <dlock/options.h>
#include <dlock/quorum.h>
#include <dlock/shared_mutex.h>
#include <dlock/status.h>
