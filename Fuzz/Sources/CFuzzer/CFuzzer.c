// Only a header; this file makes CFuzzer a C target.
#include "CFuzzer.h"
