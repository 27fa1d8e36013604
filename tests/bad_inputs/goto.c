// expect: goto: unstructured control flow
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    a[i] = 0;
    goto done; // <- error
  }
done:
  ;
#pragma endscop
}
