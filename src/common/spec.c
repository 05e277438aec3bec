#include "base/compat.h"
