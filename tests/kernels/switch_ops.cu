/* A switch per element: cases that share a body, a case that falls through into the next, a block with
 * its own loop inside a case (whose break leaves the loop, not the switch), and a default. */

extern "C" __global__ void switchOps(const int *op, const int *a, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int x = a[i] % 1000;
    int r = 0;
    switch (op[i] & 7) {
    case 0:
        r = x + 1;
        break;
    case 1:
        r = x * 3;
        break;
    case 2:
        r = -x; /* falls through */
    case 3:
        r += 100;
        break;
    case 4:
    case 5:
        r = x / 7;
        break;
    case 6: {
        int t = x;
        while (1) {
            if (t <= 9 && t >= -9)
                break;
            t /= 10;
        }
        r = t;
        break;
    }
    default:
        r = x ^ 0x55;
    }
    out[i] = r;
}
